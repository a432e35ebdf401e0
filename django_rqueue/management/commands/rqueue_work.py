"""``manage.py rqueue_work``: run a worker (see :mod:`django_rqueue.worker`)."""

from __future__ import annotations

import argparse
import logging
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_rqueue.conf import get_config
from django_rqueue.worker import Worker


def positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {number}")
    return number


def queue_list(value: str) -> list[str]:
    queues = [q.strip() for q in value.split(",") if q.strip()]
    if not queues:
        raise argparse.ArgumentTypeError("name at least one queue")
    return queues


def configure_logging(verbosity: int) -> None:
    """Log ``django_rqueue`` to stderr unless the project already configured a handler."""
    logger = logging.getLogger("django_rqueue")
    logger.setLevel(logging.DEBUG if verbosity > 1 else logging.INFO)
    if not logger.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)


class Command(BaseCommand):
    help = "Run a django-rqueue worker: reserve jobs, run them, report the outcome."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--queues",
            type=queue_list,
            default=None,
            help="Comma-separated queues in priority order (default: every declared queue).",
        )
        parser.add_argument(
            "--burst",
            action="store_true",
            help="Exit once no job is queued or running on the queues.",
        )
        parser.add_argument(
            "--max-jobs", type=positive_int, default=None, help="Exit after running this many jobs."
        )
        parser.add_argument(
            "--without-poller",
            action="store_true",
            help="Do not promote delayed jobs / reclaim leases in this process.",
        )
        parser.add_argument(
            "--worker-id", default=None, help="Id shown in logs (default host:pid:rand)."
        )

    def handle(self, *args: Any, **options: Any) -> None:  # noqa: ANN401
        configure_logging(options["verbosity"])
        config = get_config()
        queues = options["queues"] or list(config.queues)
        try:
            worker = Worker(
                queues,
                burst=options["burst"],
                max_jobs=options["max_jobs"],
                with_poller=not options["without_poller"],
                worker_id=options["worker_id"],
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        worker.install_signal_handlers()
        worker.run()
