"""Health for monitoring systems: ``manage.py rqueue_info --check``.

One pass over every distinct Redis and every declared queue gives a list of
:class:`Problem`; the worst one's :class:`Status` is the exit status, by the
Nagios plugin convention (Nagios Plugin Development Guidelines, "Plugin Return
Codes": 0 OK, 1 WARNING, 2 CRITICAL), so Nagios, Icinga, Sensu, Consul or a
cron job can run it as is.

=========  ============================================================
CRITICAL   a Redis cannot be reached, or its TLS certificate is refused
           (``rqueue.E013``/``E014``; its queues are not looked at);
           its ``maxmemory-policy`` is not ``noeviction`` (jobs can be
           evicted: ``rqueue.E010``); wrong credentials or no scripting
           rights (``rqueue.E011``/``E012``); the user's ACL lacks a
           command or a key pattern django-rqueue needs (``rqueue.E120``/
           ``E121``; that server's queues are not looked at); the oldest
           entry of a queue's outbox waited over :data:`OUTBOX_CRITICAL` s
           (outcomes for dependents on other queues that nobody relays)
WARNING    a Redis has no persistence (neither AOF nor RDB snapshots, so a
           restart loses every job: ``rqueue.W010``, as plain ``rqueue_info``
           warns); the user may not run ``CLIENT UNBLOCK`` (``rqueue.W120``);
           no worker has published a heartbeat; no poller recorded a round
           within :data:`~django_rqueue.ops.workers.POLLER_SEEN` s; a
           scheduled job is over :data:`~django_rqueue.ops.alerts.OVERDUE` s
           late (nobody promotes); the oldest entry of a queue's outbox
           waited over :data:`OUTBOX_WARNING` s (no poller relays that
           queue: its dependents on other queues wait); more failed jobs
           than ``max_failed``; the oldest queued job waited longer than
           ``max_age`` s
=========  ============================================================
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from enum import IntEnum

from django.utils import timezone

from ..conf import get_config
from ..display import printable
from ..engine.connection import get_client
from ..exceptions import RedisUnavailable
from . import health
from .alerts import queue_warnings
from .counts import queue_counts
from .workers import POLLER_SEEN, list_workers, live_pollers

#: Seconds the oldest entry of a queue's outbox may wait, by the Redis clock, before it is a
#: WARNING (the pollers relay an entry within one round, woken by it) ...
OUTBOX_WARNING = 60
#: ... and before it is CRITICAL.
OUTBOX_CRITICAL = 600

#: Problems of a Redis that leave its queues unread: unreachable, or the user may not
#: run the commands or use the keys the queries need.
UNUSABLE = frozenset({"rqueue.E013", "rqueue.E014", health.MISSING_COMMANDS, health.MISSING_KEYS})


class Status(IntEnum):
    """A problem's severity, which is also ``rqueue_info --check``'s exit status."""

    OK = 0
    WARNING = 1
    CRITICAL = 2


@dataclass(frozen=True)
class Problem:
    """One problem :func:`assess` found, and how bad it is."""

    status: Status
    #: One line for an operator, naming the queue or server concerned.
    text: str


def worst(problems: list[Problem]) -> Status:
    """The exit status for ``problems``: the worst status among them, ``OK`` for none."""
    return max((p.status for p in problems), default=Status.OK)


def assess(*, max_failed: int | None = None, max_age: float | None = None) -> list[Problem]:
    """Look at every Redis and queue of the ``RQUEUE`` setting (module docstring).

    ``max_failed`` is a count of jobs in a queue's failed store, ``max_age``
    seconds a queued job waited (``None``: not checked). Redis being down is a
    problem, not an exception: this never raises ``RedisUnavailable``.

    Raises:
        ValueError: ``max_failed`` is negative or ``max_age`` not a number >= 0.
    """
    if max_failed is not None and (isinstance(max_failed, bool) or max_failed < 0):
        raise ValueError(f"max_failed must be an integer >= 0, got {max_failed!r}")
    if max_age is not None and not max_age >= 0:
        raise ValueError(f"max_age must be seconds >= 0, got {max_age!r}")
    config = get_config()
    problems: list[Problem] = []
    down: set[int] = set()
    seen: set[int] = set()
    shared = id(get_client())
    for queue in config.queues:
        client = get_client(queue)
        if id(client) in seen:
            continue
        seen.add(id(client))
        where = health.server_label(queue)
        on_it = [q for q in config.queues if get_client(q) is client]
        keys = health.probe_keys(on_it, shared=id(client) == shared)
        for found in health.redis_problems(client, where, keys):
            if found.id in UNUSABLE:
                down.add(id(client))
            status = Status.CRITICAL if found.is_serious() else Status.WARNING
            problems.append(Problem(status, f"{found.msg} ({found.id})"))
    now = timezone.now()
    for queue in config.queues:
        if id(get_client(queue)) in down:
            continue
        try:
            problems += _queue_problems(queue, now, max_failed, max_age)
        except RedisUnavailable as exc:
            problems.append(Problem(Status.CRITICAL, f"queue {queue!r}: {exc}"))
    if id(get_client()) not in down:
        try:
            problems += _process_problems()
        except RedisUnavailable as exc:
            problems.append(Problem(Status.CRITICAL, f"workers and pollers unknown: {exc}"))
    return problems


def _queue_problems(
    queue: str, now: datetime.datetime, max_failed: int | None, max_age: float | None
) -> list[Problem]:
    counts = queue_counts(queue)
    found = [
        Problem(Status.WARNING, f"queue {queue!r}: a scheduled job is {w.late} s overdue")
        for w in queue_warnings([counts], now)
    ]
    found += outbox_problems(queue, counts.outbox_oldest_age)
    if max_failed is not None and counts.failed > max_failed:
        text = f"queue {queue!r}: {counts.failed} failed jobs (> {max_failed})"
        found.append(Problem(Status.WARNING, text))
    if max_age is not None and counts.oldest_queued_at is not None:
        age = (now - counts.oldest_queued_at).total_seconds()
        if age > max_age:
            found.append(
                Problem(
                    Status.WARNING,
                    f"queue {queue!r}: the oldest queued job waited {age:.0f} s (> {max_age:g})",
                )
            )
    return found


def outbox_problems(queue: str, age: float) -> list[Problem]:
    """The problem of ``queue``'s outbox whose oldest entry waited ``age`` seconds (Redis
    clock; :attr:`~.counts.QueueCounts.outbox_oldest_age`): a WARNING past
    :data:`OUTBOX_WARNING`, CRITICAL past :data:`OUTBOX_CRITICAL`, else none."""
    if age > OUTBOX_CRITICAL:
        status, limit = Status.CRITICAL, OUTBOX_CRITICAL
    elif age > OUTBOX_WARNING:
        status, limit = Status.WARNING, OUTBOX_WARNING
    else:
        return []
    text = (
        f"queue {queue!r}: the oldest outbox entry waited {age:.0f} s (> {limit}): no poller"
        " relays the outcomes of its jobs to their dependents on other queues"
    )
    return [Problem(status, text)]


def _process_problems() -> list[Problem]:
    found = []
    workers = list_workers()
    if not workers:
        found.append(Problem(Status.WARNING, "no worker seen (no live heartbeat)"))
    for worker in workers:
        if worker.problems:
            what = printable("; ".join(worker.problems))
            found.append(Problem(Status.WARNING, f"worker {worker.id}: corrupt entry ({what})"))
    if not live_pollers():
        found.append(Problem(Status.WARNING, f"no poller seen in the last {POLLER_SEEN:.0f} s"))
    return found
