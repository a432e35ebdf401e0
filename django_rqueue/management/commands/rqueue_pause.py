"""``manage.py rqueue_pause <queue>``: stop a queue from handing out jobs."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_rqueue.exceptions import RedisUnavailable
from django_rqueue.operations import pause_queue


class Command(BaseCommand):
    help = (
        "Pause a queue: it keeps accepting jobs (and the poller keeps queuing due ones) but "
        "no worker reserves any until rqueue_resume. Running jobs finish."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("queue", help="A queue declared in RQUEUE['QUEUES'].")

    def handle(self, *args: Any, **options: Any) -> None:
        queue: str = options["queue"]
        try:
            changed = pause_queue(queue)
        except (ValueError, RedisUnavailable) as exc:
            raise CommandError(str(exc)) from exc
        if changed:
            self.stdout.write(f"Queue {queue!r} paused: workers reserve none of its jobs.")
        else:
            self.stdout.write(f"Queue {queue!r} was already paused.")
