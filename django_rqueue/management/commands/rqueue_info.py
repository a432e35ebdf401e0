"""``manage.py rqueue_info``: queues, workers and the health of Redis, at a glance.

:meth:`Command.collect` reads everything into a typed :class:`Report`, which
is printed as tables or, with ``--json``, as the dict :meth:`Report.as_dict`
makes of it.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import sys
from typing import Any

import redis
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from django_rqueue.conf import get_config
from django_rqueue.display import printable
from django_rqueue.engine.connection import get_client, ms_to_datetime, redis_errors
from django_rqueue.engine.connection import servers as connection_servers
from django_rqueue.exceptions import RedisUnavailable
from django_rqueue.management.base import table
from django_rqueue.ops import health, monitoring
from django_rqueue.ops.alerts import QueueWarning, WarningKind, queue_warnings, worker_warnings
from django_rqueue.ops.counts import queue_counts, throughput
from django_rqueue.ops.running import RunningJob, running_jobs
from django_rqueue.ops.workers import WorkerInfo, list_workers
from django_rqueue.periodic import runtime


@dataclasses.dataclass(frozen=True)
class ServerFacts:
    """Version, memory, eviction policy and persistence of one Redis (as ``INFO`` words them)."""

    version: Any
    used_memory: Any
    maxmemory: Any
    maxmemory_policy: Any
    aof_enabled: bool
    #: Its ``save`` setting (RDB snapshots; blank: none), ``"?"`` when it may not be read.
    rdb_save: str


@dataclasses.dataclass(frozen=True)
class QueueLine:
    """One queue of the report: its counts, retention, rate limit and last hour."""

    queue: str
    queued: int
    scheduled: int
    running: int
    failed: int
    #: The failed store's retention (seconds, jobs; ``None``: none) ...
    failed_ttl: int | None
    failed_max: int | None
    #: ... and the failed jobs it deleted so far.
    failed_trimmed: int
    #: Jobs cancelled because their expiry came before they started.
    expired: int
    oldest_queued_at: datetime.datetime | None
    paused: bool
    paused_at: datetime.datetime | None
    #: The rate limit as written in the settings (``None``: none).
    rate_limit: str | None
    succeeded_last_hour: int
    failed_last_hour: int
    #: Jobs waiting for their inputs (workflow nodes, ``depends_on``) ...
    waiting: int
    #: ... and, since the queue was created, those released, and those cancelled because an
    #: input did not succeed or because of their dependency deadline.
    released_total: int
    dependency_failed_total: int
    dependency_timeout_total: int
    #: Outcomes not yet relayed to dependents on other queues, and the seconds the oldest
    #: waited (Redis clock; 0.0: none).
    outbox_pending: int
    outbox_oldest_age: float
    #: Workflows whose home is the queue: not finished, and finished so since its creation.
    workflows_running: int
    workflows_succeeded_total: int
    workflows_failed_total: int
    workflows_cancelled_total: int

    @property
    def has_dependencies(self) -> bool:
        """Whether any of the counts of waiting jobs, the outbox and workflows is not 0."""
        return any(
            (
                self.waiting,
                self.released_total,
                self.dependency_failed_total,
                self.dependency_timeout_total,
                self.outbox_pending,
                self.workflows_running,
                self.workflows_succeeded_total,
                self.workflows_failed_total,
                self.workflows_cancelled_total,
            )
        )


@dataclasses.dataclass(frozen=True)
class ScheduleLine:
    """One periodic entry of the report (times are aware UTC datetimes or ``None``)."""

    name: str
    job: str
    expression: str
    #: ``None`` when :attr:`error` says why the entry cannot run.
    queue: str | None
    next_run: datetime.datetime | None
    last_run: datetime.datetime | None
    last_job: str | None
    paused: bool
    #: Why the entry cannot run (its job is unknown, its state in Redis is unreadable...),
    #: or ``None``.
    error: str | None


@dataclasses.dataclass(frozen=True)
class Report:
    """What ``rqueue_info`` shows: each Redis by its label, the queues, the live workers,
    the periodic entries, and the warnings in the command's words."""

    redis: dict[str, ServerFacts]
    queues: list[QueueLine]
    workers: list[WorkerInfo]
    schedule: list[ScheduleLine]
    warnings: list[str]
    #: The jobs the workers run, with their progress (at most ``running.MAX_SHOWN``) ...
    running: list[RunningJob] = dataclasses.field(default_factory=list)
    #: ... and how many more they run.
    running_more: int = 0

    def as_dict(self) -> dict[str, Any]:
        """The report as plain values, for ``--json`` (dates are left to the encoder)."""
        return dataclasses.asdict(self)


def redis_facts(client: redis.Redis) -> ServerFacts:
    """Version, memory, eviction policy and persistence of one Redis."""
    with redis_errors(client):
        server = client.info("server")
        memory = client.info("memory")
        persistence = client.info("persistence")
    try:
        save = str(client.config_get("save").get("save", ""))
    except redis.ResponseError:
        save = "?"
    return ServerFacts(
        version=server.get("redis_version"),
        used_memory=memory.get("used_memory_human"),
        maxmemory=memory.get("maxmemory_human") or memory.get("maxmemory"),
        maxmemory_policy=memory.get("maxmemory_policy"),
        aof_enabled=bool(persistence.get("aof_enabled")),
        rdb_save=save,
    )


def warning_text(warning: QueueWarning) -> str:
    """The command's words for a warning of :mod:`django_rqueue.ops.alerts`."""
    match warning.kind:
        case WarningKind.OVERDUE:
            return (
                f"queue {warning.queue!r}: scheduled jobs overdue by {warning.late} s"
                " (is a poller running?)"
            )
        case WarningKind.NO_WORKER:
            return "no worker seen recently (start one with manage.py rqueue_work)"
        case WarningKind.NO_POLLER:
            return (
                "no worker runs a poller (all use --without-poller): unless rqueue_poller"
                " runs, scheduled jobs and retries are never queued"
            )
        case WarningKind.CORRUPT_WORKER:
            return printable(
                f"worker {warning.worker}: corrupt registry entry ({warning.detail}); "
                "a live worker rewrites it at its next heartbeat"
            )


def running_table(jobs: list[RunningJob], more: int) -> str:
    """The jobs the workers run with their progress, and a line for those not listed."""
    rows = [
        [
            j.id,
            j.name,
            j.worker,
            j.progress,
            j.progress.updated_at if j.progress else None,
        ]
        for j in jobs
    ]
    text = table(["RUNNING JOB", "NAME", "WORKER", "PROGRESS", "UPDATED"], rows)
    return f"{text}\n... and {more} more" if more else text


def dependency_table(queues: list[QueueLine]) -> str:
    """The table of waiting jobs, the outbox and workflows per queue (``-`` for an outbox
    without entries)."""
    return table(
        [
            "QUEUE",
            "WAITING",
            "RELEASED",
            "DEP-FAILED",
            "DEP-TIMEOUT",
            "OUTBOX",
            "OUTBOX-AGE",
            "WORKFLOWS",
            "WF-SUCCEEDED",
            "WF-FAILED",
            "WF-CANCELLED",
        ],
        [
            [
                q.queue,
                q.waiting,
                q.released_total,
                q.dependency_failed_total,
                q.dependency_timeout_total,
                q.outbox_pending,
                f"{q.outbox_oldest_age:.0f} s" if q.outbox_pending else "-",
                q.workflows_running,
                q.workflows_succeeded_total,
                q.workflows_failed_total,
                q.workflows_cancelled_total,
            ]
            for q in queues
        ],
    )


class Command(BaseCommand):
    """The ``rqueue_info`` command; :meth:`collect` reads what it prints."""

    help = "Show queues with their counts, workers, periodic jobs, and the health of Redis."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="Machine-readable output.")
        parser.add_argument(
            "--check",
            action="store_true",
            help="Monitoring mode: one line per problem, exit 0 OK, 1 WARNING, 2 CRITICAL "
            "(the Nagios plugin convention).",
        )
        parser.add_argument(
            "--max-failed",
            type=int,
            default=None,
            metavar="N",
            help="With --check: WARNING when a queue holds more than N failed jobs.",
        )
        parser.add_argument(
            "--max-age",
            type=float,
            default=None,
            metavar="SECONDS",
            help="With --check: WARNING when a queue's oldest queued job waited longer.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["check"]:
            self.check_health(options["max_failed"], options["max_age"])
        if options["max_failed"] is not None or options["max_age"] is not None:
            raise CommandError("--max-failed and --max-age go with --check")
        try:
            report = self.collect()
        except RedisUnavailable as exc:
            raise CommandError(str(exc)) from exc
        if options["json"]:
            self.stdout.write(json.dumps(report.as_dict(), indent=2, default=str))
        else:
            self.print_report(report)

    def check_health(self, max_failed: int | None, max_age: float | None) -> None:
        """Print ``RQUEUE <STATUS>: ...`` then one line per problem; exit with the status."""
        try:
            problems = monitoring.assess(max_failed=max_failed, max_age=max_age)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        except RedisUnavailable as exc:  # a cluster none of whose nodes answers, ...
            problems = [monitoring.Problem(monitoring.Status.CRITICAL, str(exc))]
        status = monitoring.worst(problems)
        queues = len(get_config().queues)
        summary = f"{len(problems)} problem(s)" if problems else f"{queues} queue(s) healthy"
        self.stdout.write(f"RQUEUE {status.name}: {summary}")
        for problem in sorted(problems, key=lambda p: -p.status):
            self.stdout.write(f"{problem.status.name}: {problem.text}")
        sys.exit(int(status))

    def collect(self) -> Report:
        """Read the servers, the queues, the workers and the periodic entries."""
        config = get_config()
        servers: dict[str, ServerFacts] = {}
        looked_at: set[str] = set()
        warnings: list[str] = []
        queues = []
        now = timezone.now()
        for queue in config.queues:
            client = get_client(queue)
            where = health.server_label(queue)
            if where not in looked_at:
                looked_at.add(where)
                for node, server in connection_servers(client):
                    servers[f"{where} node {node}" if node else where] = redis_facts(server)
                on_it = [q for q in config.queues if get_client(q) is client]
                keys = health.probe_keys(on_it, shared=client is get_client())
                problems = health.redis_problems(client, where, keys)
                warnings += [f"{p.id}: {p.msg}" for p in problems]
            counts = queue_counts(queue)
            rates = throughput(queue)
            qconf = config.queue(queue)
            warnings += [warning_text(w) for w in queue_warnings([counts], now)]
            warnings += [
                p.text for p in monitoring.outbox_problems(queue, counts.outbox_oldest_age)
            ]
            rate_limit = config.queue(queue).rate_limit
            queues.append(
                QueueLine(
                    queue=queue,
                    queued=counts.queued,
                    scheduled=counts.scheduled,
                    running=counts.running,
                    failed=counts.failed,
                    failed_ttl=qconf.failed_ttl,
                    failed_max=qconf.failed_max,
                    failed_trimmed=counts.trimmed,
                    expired=counts.expired,
                    oldest_queued_at=counts.oldest_queued_at,
                    paused=counts.paused,
                    paused_at=counts.paused_at,
                    rate_limit=None if rate_limit is None else str(rate_limit),
                    succeeded_last_hour=sum(s for _, s, _f in rates),
                    failed_last_hour=sum(f for _, _s, f in rates),
                    waiting=counts.waiting,
                    released_total=counts.released_total,
                    dependency_failed_total=counts.dependency_failed_total,
                    dependency_timeout_total=counts.dependency_timeout_total,
                    outbox_pending=counts.outbox_pending,
                    outbox_oldest_age=counts.outbox_oldest_age,
                    workflows_running=counts.workflows_running,
                    workflows_succeeded_total=counts.workflows_succeeded_total,
                    workflows_failed_total=counts.workflows_failed_total,
                    workflows_cancelled_total=counts.workflows_cancelled_total,
                )
            )
        workers = list_workers()
        warnings += [warning_text(w) for w in worker_warnings(workers)]
        schedule = [self.entry(state) for state in runtime.entry_states()]
        warnings += [
            f"schedule entry {e.name!r} is not run: {e.error}" for e in schedule if e.error
        ]
        shown, more = running_jobs(workers)
        return Report(servers, queues, workers, schedule, warnings, shown, more)

    @staticmethod
    def entry(state: runtime.EntryState) -> ScheduleLine:
        """One periodic entry of the report."""
        return ScheduleLine(
            name=state.name,
            job=state.entry.job,
            expression=state.entry.expression,
            queue=state.queue,
            next_run=state.next_run,
            last_run=state.last_run,
            last_job=state.last_job_id or None,
            paused=state.paused,
            error=state.error or None,
        )

    def print_report(self, report: Report) -> None:
        for where, facts in report.redis.items():
            persistence = "AOF" if facts.aof_enabled else ""
            if facts.rdb_save.strip():
                persistence = f"{persistence} RDB({facts.rdb_save})".strip()
            self.stdout.write(
                f"{where}: redis {facts.version}, memory {facts.used_memory}"
                f" (maxmemory {facts.maxmemory}, policy {facts.maxmemory_policy}),"
                f" persistence {persistence or 'off'}"
            )
        self.stdout.write("")
        self.stdout.write(
            table(
                [
                    "QUEUE",
                    "QUEUED",
                    "SCHEDULED",
                    "RUNNING",
                    "FAILED",
                    "TRIMMED",
                    "EXPIRED",
                    "OLDEST QUEUED",
                    "SUCCEEDED/H",
                    "FAILED/H",
                    "RATE LIMIT",
                    "STATE",
                ],
                [
                    [
                        q.queue,
                        q.queued,
                        q.scheduled,
                        q.running,
                        q.failed,
                        q.failed_trimmed,
                        q.expired,
                        q.oldest_queued_at,
                        q.succeeded_last_hour,
                        q.failed_last_hour,
                        q.rate_limit or "-",
                        "paused" if q.paused else "active",
                    ]
                    for q in report.queues
                ],
            )
        )
        if any(q.has_dependencies for q in report.queues):
            self.stdout.write("")
            self.stdout.write(dependency_table(report.queues))
        self.stdout.write("")
        if report.workers:
            self.stdout.write(
                table(
                    ["WORKER", "HOST", "PID", "QUEUES", "JOBS", "HEARTBEAT"],
                    [
                        [
                            w.id,
                            w.host,
                            w.pid,
                            ",".join(w.queues),
                            len(w.jobs),
                            ms_to_datetime(w.heartbeat),
                        ]
                        for w in report.workers
                    ],
                )
            )
        else:
            self.stdout.write("workers: none seen")
        if report.running:
            self.stdout.write("")
            self.stdout.write(running_table(report.running, report.running_more))
        if report.schedule:
            self.stdout.write("")
            self.stdout.write(
                table(
                    [
                        "SCHEDULE",
                        "JOB",
                        "WHEN",
                        "QUEUE",
                        "NEXT RUN",
                        "LAST RUN",
                        "LAST JOB",
                        "PAUSED",
                    ],
                    [
                        [
                            e.name,
                            e.job,
                            e.expression,
                            e.queue,
                            e.next_run,
                            e.last_run,
                            e.last_job,
                            "yes" if e.paused else "no",
                        ]
                        for e in report.schedule
                    ],
                )
            )
        for warning in report.warnings:
            self.stdout.write(self.style.WARNING(f"WARNING {warning}"))
