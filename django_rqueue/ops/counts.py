"""Counts of one queue (jobs per state, totals since creation, throughput), read in O(1).

The admin's overview, the commands and the Prometheus metrics read them.

Every function here costs a bounded number of round trips and reads a
bounded amount of data, whatever the size of the queue: counts are
``HGET``/``HMGET``/``ZCARD`` of the queue's ``stats`` hash and zsets, ``XLEN`` and a
one-entry ``XRANGE`` of its ``outbox`` stream, and the oldest queued job is found from a
bounded sample of group heads.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

import redis

from ..engine.connection import (
    as_text,
    is_cluster,
    ms_to_datetime,
    redis_errors,
    redis_time_ms,
    wrong_type,
)
from ..engine.fields import JobFields, StatsFields
from ..engine.keys import QueueKeys
from ..engine.queue_ref import queue_ref

#: Priority levels and groups per level sampled for the oldest queued job.
OLDEST_PRIOS = 10
OLDEST_GROUPS = 20


@dataclass
class QueueCounts:
    """What the overview shows for one queue; every count is O(1) to read."""

    queue: str
    queued: int = 0
    scheduled: int = 0
    running: int = 0
    failed: int = 0
    #: Successes / final failures since the queue was created (``stats`` hash).
    succeeded_total: int = 0
    failed_total: int = 0
    #: Jobs created on the queue (by any enqueue path) since it was created.
    enqueued_total: int = 0
    #: Failed attempts scheduled again (a retry with backoff) since the queue was created.
    retried_total: int = 0
    #: Expired leases taken back by a poller (the job requeued or failed) since then.
    reclaimed_total: int = 0
    #: Failed jobs deleted by the failed store's retention (``failed_ttl``, ``failed_max``)
    #: since the queue was created.
    trimmed: int = 0
    #: Jobs cancelled by their expiry (``expires=``) since the queue was created.
    expired: int = 0
    #: When the longest-waiting job among the next groups to be served became due.
    oldest_queued_at: datetime.datetime | None = None
    #: Run-at of the earliest scheduled job (overdue when in the past: no poller?).
    next_scheduled_at: datetime.datetime | None = None
    #: Whether the queue is paused (``rqueue_pause``: it accepts jobs, hands out none).
    paused: bool = False
    #: When the pause began (``None`` while the queue runs).
    paused_at: datetime.datetime | None = None
    #: Jobs waiting for their inputs (state ``waiting``: workflow nodes, ``depends_on``).
    waiting: int = 0
    #: Since the queue was created: waiting jobs released (queued or scheduled) once their
    #: inputs had all ended, ...
    released_total: int = 0
    #: ... cancelled because an input failed (``dependency_failed``), ...
    dependency_failed_total: int = 0
    #: ... and cancelled because they waited past their dependency deadline
    #: (``dependency_timeout``).
    dependency_timeout_total: int = 0
    #: Outcomes of this queue's jobs not yet delivered to dependents on other queues
    #: (entries of its ``outbox`` stream: the pollers relay and delete them).
    outbox_pending: int = 0
    #: When the oldest of them was written (Redis clock; ``None``: the outbox is empty).
    outbox_oldest_at: datetime.datetime | None = None
    #: Its age in seconds by the Redis clock at the read (0.0 when the outbox is empty).
    outbox_oldest_age: float = 0.0
    #: Workflows whose home is this queue that have not finished (started, counting each
    #: restart by ``retry_failed()``, minus finished).
    workflows_running: int = 0
    #: Workflows whose home is this queue that finished so, since the queue was created.
    workflows_succeeded_total: int = 0
    workflows_failed_total: int = 0
    workflows_cancelled_total: int = 0
    error: str = ""


#: The fields of a queue's ``stats`` hash (keys.py) that :func:`queue_counts` reads.
_STATS_FIELDS = (
    *(StatsFields.QUEUED, StatsFields.SUCCEEDED, StatsFields.FAILED, StatsFields.ENQUEUED),
    *(StatsFields.RETRIED, StatsFields.RECLAIMED, StatsFields.TRIMMED, StatsFields.EXPIRED),
    *StatsFields.WORKFLOW_COUNTERS,
)


def queue_counts(queue: str) -> QueueCounts:
    """Counts of one queue in two round trips (one more for the oldest queued job; on a
    Redis Cluster, one more for the clock when the outbox holds an entry).

    Raises:
        ValueError: ``queue`` is not declared.
        RedisUnavailable: Redis cannot be reached.
    """
    ref = queue_ref(queue)
    keys, client = ref.keys, ref.client()
    with redis_errors(client):
        pipe = client.pipeline(transaction=False)
        pipe.hmget(keys.stats, *_STATS_FIELDS)
        pipe.zcard(keys.delayed)
        pipe.zcard(keys.reserved)
        pipe.zcard(keys.failed)
        pipe.zrange(keys.delayed, 0, 0, withscores=True)
        pipe.zrevrange(keys.prios, 0, OLDEST_PRIOS - 1)
        pipe.get(keys.paused)
        pipe.zcard(keys.waiting)
        pipe.xlen(keys.outbox)
        pipe.xrange(keys.outbox, count=1)
        if not is_cluster(client):  # a cluster pipeline carries no TIME: read below, when needed
            pipe.time()
        stats, delayed, reserved, failed, head, prios, paused, waiting, pending, first, *now = (
            pipe.execute()
        )
        oldest_ms = _entry_ms(first[0][0]) if first else None
        if oldest_ms is None:
            now_ms = 0  # no age to compute
        elif now:
            now_ms = int(now[0][0]) * 1000 + int(now[0][1]) // 1000
        else:
            now_ms = redis_time_ms(client)
    totals = dict(zip(_STATS_FIELDS, map(counter, stats), strict=True))
    finished = (
        totals[StatsFields.WORKFLOWS_SUCCEEDED],
        totals[StatsFields.WORKFLOWS_FAILED],
        totals[StatsFields.WORKFLOWS_CANCELLED],
    )
    counts = QueueCounts(
        queue,
        queued=totals[StatsFields.QUEUED],
        scheduled=delayed,
        running=reserved,
        failed=failed,
        succeeded_total=totals[StatsFields.SUCCEEDED],
        failed_total=totals[StatsFields.FAILED],
        enqueued_total=totals[StatsFields.ENQUEUED],
        retried_total=totals[StatsFields.RETRIED],
        reclaimed_total=totals[StatsFields.RECLAIMED],
        trimmed=totals[StatsFields.TRIMMED],
        expired=totals[StatsFields.EXPIRED],
        next_scheduled_at=ms_to_datetime(head[0][1]) if head else None,
        paused=paused is not None,
        paused_at=ms_to_datetime(paused),
        waiting=waiting,
        released_total=totals[StatsFields.RELEASED],
        dependency_failed_total=totals[StatsFields.DEPENDENCY_FAILED],
        dependency_timeout_total=totals[StatsFields.DEPENDENCY_TIMEOUT],
        outbox_pending=pending,
        workflows_running=max(0, totals[StatsFields.WORKFLOWS_STARTED] - sum(finished)),
        workflows_succeeded_total=finished[0],
        workflows_failed_total=finished[1],
        workflows_cancelled_total=finished[2],
    )
    if oldest_ms is not None:
        counts.outbox_oldest_at = ms_to_datetime(oldest_ms)
        counts.outbox_oldest_age = max(0, now_ms - oldest_ms) / 1000
    counts.oldest_queued_at = _oldest_queued(client, keys, [as_text(p) for p in prios])
    return counts


def _entry_ms(entry_id: bytes | str) -> int:
    """The Redis time (ms) a stream entry was added: its id is ``<ms>-<sequence>``."""
    return int(as_text(entry_id).partition("-")[0])


@dataclass(frozen=True)
class FailedRetention:
    """A queue's failed-store retention (its settings) and what it deleted so far."""

    #: Seconds a failed job is kept (``None``: forever).
    ttl: int | None
    #: Failed jobs kept at most (``None``: no cap).
    max_jobs: int | None
    #: Failed jobs deleted by it since the queue was created.
    trimmed: int


def counter(value: bytes | str | None) -> int:
    """A counter as Redis stores it (``HINCRBY``); 0 when absent or corrupt (not an integer,
    or longer than the 4 300 digits ``int()`` reads)."""
    try:
        return int(value or 0)
    except ValueError:
        return 0


def failed_retention(queue: str) -> FailedRetention:
    """The retention of ``queue``'s failed store, with its deletion count (one ``HGET``)."""
    ref = queue_ref(queue)
    client = ref.client()
    with redis_errors(client):
        trimmed = client.hget(ref.keys.stats, StatsFields.TRIMMED)
    return FailedRetention(ref.config.failed_ttl, ref.config.failed_max, counter(trimmed))


def _oldest_queued(
    client: redis.Redis, keys: QueueKeys, prios: list[str]
) -> datetime.datetime | None:
    """The earliest ``run_at`` among the heads of the first groups of each priority.

    Exact when a queue has at most :data:`OLDEST_GROUPS` groups per priority
    (the common case); a bounded sample otherwise.
    """
    if not prios:
        return None
    with redis_errors(client):
        pipe = client.pipeline(transaction=False)
        for prio in prios:
            pipe.lrange(keys.ring(int(prio)), 0, OLDEST_GROUPS - 1)
        rings = pipe.execute()
        for prio, groups in zip(prios, rings, strict=True):
            for group in groups:
                pipe.lindex(keys.group(int(prio), as_text(group)), 0)
        heads = [as_text(h) for h in pipe.execute() if h]
        for job_id in heads:
            # The run-at is left out while it equals the enqueue time (enqueue_job.lua).
            pipe.hmget(keys.job(job_id), JobFields.RUN_AT, JobFields.ENQUEUED_AT)
        replies = pipe.execute(raise_on_error=False)
    found = []
    for reply in replies:
        if isinstance(reply, Exception):
            if not wrong_type(reply):
                raise reply
            continue  # a head that is not a job hash: no time to show
        found.append(ms_to_datetime(reply[0] or reply[1]))
    times = [t for t in found if t is not None]
    return min(times) if times else None


def hash_and_time(client: redis.Redis, key: str) -> tuple[int, dict[bytes | str, bytes | str]]:
    """``(the Redis clock in ms, HGETALL key)`` in one round trip (one pipeline); two on a
    Redis Cluster, whose pipelines carry no ``TIME`` (the clock is then any master's).

    Raises:
        RedisUnavailable: Redis cannot be reached.
    """
    with redis_errors(client):
        if is_cluster(client):
            (seconds, micros), raw = client.time(), client.hgetall(key)
        else:
            pipe = client.pipeline(transaction=False)
            pipe.time()
            pipe.hgetall(key)
            (seconds, micros), raw = pipe.execute()
    return int(seconds) * 1000 + int(micros) // 1000, raw


def throughput(queue: str) -> list[tuple[datetime.datetime, int, int]]:
    """``(minute, succeeded, failed)`` for each of the last 60 minutes, oldest first."""
    ref = queue_ref(queue)
    keys, client = ref.keys, ref.client()
    now_ms, raw = hash_and_time(client, keys.throughput)
    seconds = now_ms // 1000
    fields = {as_text(k): counter(v) for k, v in raw.items()}
    now_minute = int(seconds) // 60
    rows = []
    for minute in range(now_minute - 59, now_minute + 1):
        slot = minute % 60
        counted = fields.get(f"m{slot}") == minute
        rows.append(
            (
                datetime.datetime.fromtimestamp(minute * 60, tz=datetime.UTC),
                fields.get(f"s{slot}", 0) if counted else 0,
                fields.get(f"f{slot}", 0) if counted else 0,
            )
        )
    return rows
