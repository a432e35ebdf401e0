"""``manage.py rqueue_poller``: promote due jobs and reclaim expired leases."""

from __future__ import annotations

import logging
import signal
from types import FrameType
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_rqueue.conf import get_config
from django_rqueue.management.base import configure_logging, queue_list
from django_rqueue.master.startup import UNREACHABLE
from django_rqueue.ops.health import NO_UNBLOCK, problems_by_server
from django_rqueue.worker.blocking import unblock_refused
from django_rqueue.worker.poller import Poller

logger = logging.getLogger("django_rqueue.poller")


class Command(BaseCommand):
    """The ``rqueue_poller`` command."""

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
        self.check_redis(queues)
        poller = Poller(queues)

        def stop(signum: int, frame: FrameType | None) -> None:
            poller.stop.set()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        poller.run()

    def check_redis(self, queues: list[str]) -> None:
        """Refuse to start on a Redis that answers with an error-level problem (eviction
        policy, credentials, a command or key pattern its user's ACL lacks); log the
        warnings. An unreachable Redis (:data:`UNREACHABLE`) is left to the poller, which
        retries it."""
        errors = []
        for server, problems in problems_by_server(queues).items():
            for problem in problems:
                if problem.id == NO_UNBLOCK:
                    unblock_refused(server, server.display, report=False)
                if problem.is_serious() and problem.id != UNREACHABLE:
                    errors.append(f"{problem.id}: {problem.msg} {problem.hint or ''}".strip())
                elif problem.id != UNREACHABLE:
                    logger.warning("%s: %s %s", problem.id, problem.msg, problem.hint or "")
        if errors:
            raise CommandError("refusing to start:\n" + "\n".join(errors))
