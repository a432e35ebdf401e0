"""``manage.py rqueue_restart``: make every worker finish its jobs and re-exec itself."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from django_rqueue.master.heartbeat import request_restart
from django_rqueue.ops.workers import list_workers


class Command(BaseCommand):
    """The ``rqueue_restart`` command."""

    help = (
        "Ask every django-rqueue worker, on every host, to finish its running jobs and "
        "re-exec itself with the same command line (new code is picked up). Workers see "
        "the request at their next heartbeat (within a few seconds)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        request_restart()
        count = len(list_workers())
        self.stdout.write(f"Restart requested for {count} live worker(s).")
