"""``manage.py rqueue_work``: run a worker (see :mod:`django_rqueue.worker.supervisor`)."""

from __future__ import annotations

import argparse
import logging
import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_rqueue.conf import get_config
from django_rqueue.worker.supervisor import StartupError, Supervisor


def positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {number}")
    return number


def seconds(value: str) -> float:
    number = float(value)
    if number < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0 seconds, got {value}")
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
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)s %(process)d %(name)s: %(message)s")
        )
        logger.addHandler(handler)


class Command(BaseCommand):
    help = (
        "Run a django-rqueue worker: a master process supervising N child processes that "
        "reserve jobs, run them and report the outcome."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--queues",
            type=queue_list,
            default=None,
            help="Comma-separated queues in priority order (default: every declared queue).",
        )
        parser.add_argument(
            "--concurrency",
            type=positive_int,
            default=os.cpu_count() or 1,
            help="Child processes running jobs (default: the number of CPUs).",
        )
        parser.add_argument(
            "--burst",
            action="store_true",
            help="Exit once no job is queued or running on the queues.",
        )
        parser.add_argument(
            "--max-jobs",
            type=positive_int,
            default=None,
            help="Replace a child after it ran this many jobs.",
        )
        parser.add_argument(
            "--max-memory",
            type=positive_int,
            default=None,
            metavar="MB",
            help="Replace a child after a job leaves it above this RSS (MiB).",
        )
        parser.add_argument(
            "--shutdown-timeout",
            type=seconds,
            default=30.0,
            help="On SIGTERM/SIGINT, seconds running jobs get to finish before they are "
            "handed back to the queue without spending an attempt (default 30).",
        )
        parser.add_argument(
            "--timeout-grace",
            type=seconds,
            default=None,
            help="Seconds between a job's soft and hard timeout (default RQUEUE['TIMEOUT_GRACE']).",
        )
        parser.add_argument(
            "--without-poller",
            action="store_true",
            help="Do not promote delayed jobs / reclaim leases from this worker.",
        )
        parser.add_argument(
            "--worker-id", default=None, help="Id shown in logs (default host:pid:rand)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        configure_logging(options["verbosity"])
        config = get_config()
        queues = options["queues"] or list(config.queues)
        try:
            supervisor = Supervisor(
                queues,
                concurrency=options["concurrency"],
                burst=options["burst"],
                max_jobs=options["max_jobs"],
                max_memory_mb=options["max_memory"],
                shutdown_timeout=options["shutdown_timeout"],
                timeout_grace=options["timeout_grace"],
                with_poller=not options["without_poller"],
                worker_id=options["worker_id"],
            )
            supervisor.run()
        except (ValueError, StartupError) as exc:
            raise CommandError(str(exc)) from exc
