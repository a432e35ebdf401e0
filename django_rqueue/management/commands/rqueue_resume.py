"""``manage.py rqueue_resume <queue>``: let a paused queue hand out jobs again."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_rqueue.exceptions import RedisUnavailable
from django_rqueue.operations import resume_queue


class Command(BaseCommand):
    help = "Resume a paused queue: its idle workers are woken and take its queued jobs at once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("queue", help="A queue declared in RQUEUE['QUEUES'].")

    def handle(self, *args: Any, **options: Any) -> None:
        queue: str = options["queue"]
        try:
            changed = resume_queue(queue)
        except (ValueError, RedisUnavailable) as exc:
            raise CommandError(str(exc)) from exc
        if changed:
            self.stdout.write(f"Queue {queue!r} resumed.")
        else:
            self.stdout.write(f"Queue {queue!r} was not paused.")
