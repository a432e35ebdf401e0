"""``manage.py rqueue_work``: run a worker (see :mod:`django_rqueue.master.supervisor`), or,
with ``--reload``, a reloader that runs it (:mod:`django_rqueue.management.reloader`)."""

from __future__ import annotations

import os
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_rqueue.conf import get_config
from django_rqueue.exceptions import StartupError
from django_rqueue.management import reloader
from django_rqueue.management.base import (
    configure_logging,
    positive_int,
    queue_selection,
    seconds,
)
from django_rqueue.master.supervisor import Supervisor
from django_rqueue.worker.settings import WorkerSettings


class Command(BaseCommand):
    """The ``rqueue_work`` command."""

    help = (
        "Run a django-rqueue worker: a master process supervising N child processes that "
        "reserve jobs, run them and report the outcome."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--queues",
            type=queue_selection,
            default=None,
            help="Comma-separated queues in priority order: 'high,low' serves high first, "
            "always; with weights, 'high:5,default:3,low:1' picks the queue of each job at "
            "random in proportion to its weight, as Sidekiq does (default: every declared "
            "queue, in strict order).",
        )
        parser.add_argument(
            "--concurrency",
            type=positive_int,
            default=os.cpu_count() or 1,
            help="Child processes running jobs (default: the number of CPUs).",
        )
        parser.add_argument(
            "--async-concurrency",
            type=positive_int,
            default=None,
            help="async def jobs each child runs at once on its event loop "
            "(default RQUEUE['ASYNC_CONCURRENCY'], 1).",
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
        parser.add_argument(
            "--reload",
            action="store_true",
            help="Development only: restart the worker in a fresh process when a Python file "
            "of the project changes (needs the 'reload' extra: watchfiles). Not with --burst.",
        )
        parser.add_argument(
            "--reload-dir",
            action="append",
            default=None,
            metavar="DIR",
            help="With --reload, a directory to watch (repeatable; default: settings.BASE_DIR, "
            "else the current directory).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        configure_logging(options["verbosity"])
        if options["reload"] and not reloader.reloaded():
            if options["burst"]:
                raise CommandError(
                    "--reload and --burst: a burst worker exits once the queues are empty, "
                    "there is nothing to reload"
                )
            code = reloader.Reloader(
                reloader.watched_dirs(options["reload_dir"]),
                shutdown_timeout=options["shutdown_timeout"],
            ).run()
            if code:
                sys.exit(code)
            return
        if options["reload"]:
            reloader.follow_reloader()
        config = get_config()
        selection = options["queues"]
        queues = list(selection.queues) if selection else list(config.queues)
        try:
            settings = WorkerSettings(
                tuple(queues),
                weights=selection.weights if selection else None,
                burst=options["burst"],
                max_jobs=options["max_jobs"],
                max_memory_mb=options["max_memory"],
                async_concurrency=options["async_concurrency"],
            )
            supervisor = Supervisor(
                settings,
                concurrency=options["concurrency"],
                shutdown_timeout=options["shutdown_timeout"],
                timeout_grace=options["timeout_grace"],
                with_poller=not options["without_poller"],
                worker_id=options["worker_id"],
            )
            supervisor.run()
        except (ValueError, StartupError) as exc:
            raise CommandError(str(exc)) from exc
