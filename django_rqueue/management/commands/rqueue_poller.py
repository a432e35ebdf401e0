"""``manage.py rqueue_poller``: promote due jobs and reclaim expired leases."""

from __future__ import annotations

import signal
from types import FrameType
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_rqueue.conf import get_config
from django_rqueue.management.base import configure_logging, queue_list
from django_rqueue.worker.poller import Poller


class Command(BaseCommand):
    help = "Promote due scheduled jobs and reclaim expired leases (any number may run)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--queues",
            type=queue_list,
            default=None,
            help="Comma-separated queues (default: every declared queue).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        configure_logging(options["verbosity"])
        config = get_config()
        queues = options["queues"] or list(config.queues)
        try:
            for queue in queues:
                config.queue(queue)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        poller = Poller(queues)

        def stop(signum: int, frame: FrameType | None) -> None:
            poller.stop.set()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        poller.run()
