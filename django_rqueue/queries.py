"""Read-only views of the queues for the admin and the commands.

Every function here costs a bounded number of round trips and reads a
bounded amount of data, whatever the size of the queue: counts are
``HGET``/``ZCARD``/``LLEN``, listings are ``ZRANGE``/``LRANGE`` slices whose
job hashes are read in one pipeline, and a name filter scans at most
:data:`SCAN_LIMIT` ids per request and hands back a cursor. Nothing here
uses ``KEYS`` or ``SCAN``.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, overload

import redis
from django.utils import timezone

from .conf import get_config
from .engine.connection import (
    as_text,
    is_cluster,
    ms_to_datetime,
    redis_errors,
    wrong_type,
)
from .engine.keys import JobFields, QueueKeys, queue_of
from .engine.queue_ref import queue_ref
from .exceptions import RedisUnavailable
from .job import Job, JobStatus

#: Job states that have a listing (cancelled jobs have none), in display order.
STATES: tuple[JobStatus, ...] = (
    JobStatus.QUEUED,
    JobStatus.SCHEDULED,
    JobStatus.RUNNING,
    JobStatus.FAILED,
    JobStatus.SUCCEEDED,
)
#: Ids a filtered listing examines per request before it returns a cursor.
SCAN_LIMIT = 5000
#: Ids read per round trip while a filtered listing scans.
SCAN_CHUNK = 500
#: Priority levels and groups per level sampled for the oldest queued job.
OLDEST_PRIOS = 10
OLDEST_GROUPS = 20
#: A scheduled job this many seconds past its run-at means nobody promotes jobs (no poller?).
OVERDUE = 60

# state -> (QueueKeys attribute of the zset, newest first?)
_ZSETS = {
    JobStatus.SCHEDULED: ("delayed", False),
    JobStatus.RUNNING: ("reserved", False),
    JobStatus.FAILED: ("failed", True),
    JobStatus.SUCCEEDED: ("succeeded", True),
}


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
    error: str = ""


#: The fields of a queue's ``stats`` hash (keys.py) that :func:`queue_counts` reads.
_STATS_FIELDS = (
    *("queued", "succeeded", "failed", "enqueued"),
    *("retried", "reclaimed", "trimmed", "expired"),
)


def queue_counts(queue: str) -> QueueCounts:
    """Counts of one queue in two round trips (one more for the oldest queued job)."""
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
        stats, delayed, reserved, failed, head, prios, paused = pipe.execute()
    totals = dict(zip(_STATS_FIELDS, map(counter, stats), strict=True))
    counts = QueueCounts(
        queue,
        queued=totals["queued"],
        scheduled=delayed,
        running=reserved,
        failed=failed,
        succeeded_total=totals["succeeded"],
        failed_total=totals["failed"],
        enqueued_total=totals["enqueued"],
        retried_total=totals["retried"],
        reclaimed_total=totals["reclaimed"],
        trimmed=totals["trimmed"],
        expired=totals["expired"],
        next_scheduled_at=ms_to_datetime(head[0][1]) if head else None,
        paused=paused is not None,
        paused_at=ms_to_datetime(paused),
    )
    counts.oldest_queued_at = _oldest_queued(client, keys, [as_text(p) for p in prios])
    return counts


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
        trimmed = client.hget(ref.keys.stats, "trimmed")
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


class WarningKind(StrEnum):
    """What a :class:`QueueWarning` is about (the admin and rqueue_info each word it their way)."""

    #: The earliest scheduled job of ``queue`` is more than :data:`OVERDUE` seconds late.
    OVERDUE = "overdue"
    #: No worker has published a heartbeat recently.
    NO_WORKER = "no_worker"
    #: Workers are live, but every one runs with ``--without-poller``.
    NO_POLLER = "no_poller"
    #: A worker's entry in the registry is corrupt (``worker``; ``detail`` says how).
    CORRUPT_WORKER = "corrupt_worker"


@dataclass(frozen=True)
class QueueWarning:
    """Something for an operator to look at: see :func:`queue_warnings`, :func:`worker_warnings`."""

    kind: WarningKind
    #: The queue concerned (``OVERDUE`` only).
    queue: str = ""
    #: Whole seconds the earliest scheduled job is late (``OVERDUE`` only).
    late: int = 0
    #: The worker id (``CORRUPT_WORKER`` only).
    worker: str = ""
    #: What is wrong (``CORRUPT_WORKER`` only).
    detail: str = ""


def queue_warnings(
    counts: Iterable[QueueCounts], now: datetime.datetime | None = None
) -> list[QueueWarning]:
    """``OVERDUE`` for each queue whose earliest scheduled job is over :data:`OVERDUE` s late."""
    now = timezone.now() if now is None else now
    found = []
    for each in counts:
        due = each.next_scheduled_at
        if due is not None and (now - due).total_seconds() > OVERDUE:
            late = int((now - due).total_seconds())
            found.append(QueueWarning(WarningKind.OVERDUE, queue=each.queue, late=late))
    return found


class _Worker(Protocol):
    """What :func:`worker_warnings` reads of a worker's heartbeat info (``WorkerInfo``)."""

    @property
    def id(self) -> str: ...

    @property
    def poller(self) -> bool: ...

    @property
    def problems(self) -> tuple[str, ...]: ...


def worker_warnings(workers: Sequence[_Worker]) -> list[QueueWarning]:
    """``NO_WORKER`` when no worker is live, ``NO_POLLER`` when none of them runs a poller;
    ``CORRUPT_WORKER`` for each worker whose registry entry is corrupt."""
    if not workers:
        return [QueueWarning(WarningKind.NO_WORKER)]
    found = [
        QueueWarning(WarningKind.CORRUPT_WORKER, worker=w.id, detail="; ".join(w.problems))
        for w in workers
        if w.problems
    ]
    if not any(w.poller for w in workers):
        found.insert(0, QueueWarning(WarningKind.NO_POLLER))
    return found


def job_exists(job_id: str) -> bool:
    """Whether a job of a declared queue has the id ``job_id`` (one ``EXISTS``)."""
    queue = queue_of(job_id)
    if queue is None or queue not in get_config().queues:
        return False
    ref = queue_ref(queue)
    client = ref.client()
    with redis_errors(client):
        return bool(client.exists(ref.keys.job(job_id)))


@dataclass
class Row:
    """One listed job: its record (``None`` when the hash is gone) and its score."""

    id: str
    job: Job[Any] | None
    #: The zset score as a time (run-at, lease deadline, failed-at…); ``None`` for lists.
    at: datetime.datetime | None = None


def read_jobs(queue: str, ids: Sequence[str]) -> list[Job[Any] | None]:
    """Read the hashes of ``ids`` in one pipeline (``None`` for a missing one; a key that
    is not a hash reads as :meth:`Job.unreadable <django_rqueue.job.Job.unreadable>`)."""
    if not ids:
        return []
    ref = queue_ref(queue)
    keys, client = ref.keys, ref.client()
    with redis_errors(client):
        pipe = client.pipeline(transaction=False)
        for job_id in ids:
            pipe.hgetall(keys.job(job_id))
        hashes = pipe.execute(raise_on_error=False)
        return [_job_of(i, h) for i, h in zip(ids, hashes, strict=True)]


def _job_of(job_id: str, reply: Any) -> Job[Any] | None:  # an HGETALL reply, or its error
    if isinstance(reply, Exception):
        if wrong_type(reply):
            return Job.unreadable(job_id, str(reply))
        raise reply
    return Job.from_fields(job_id, reply) if reply else None


@dataclass
class JobSource:
    """The ids of one state of one queue, sliceable for ``Paginator``.

    ``count()`` is one ``ZCARD``/``LLEN``; a slice is one range read plus one
    pipeline of ``HGETALL`` for that slice only.
    """

    queue: str
    #: One of :data:`STATES` (a string naming one is accepted and converted).
    state: JobStatus
    priority: int = 0
    group: str = ""
    _count: int | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.state not in STATES:
            raise ValueError(f"unknown state {self.state!r}")
        self.state = JobStatus(self.state)

    def count(self) -> int:
        if self._count is None:
            ref = queue_ref(self.queue)
            keys, client = ref.keys, ref.client()
            with redis_errors(client):
                if self.state is JobStatus.QUEUED:
                    self._count = int(client.llen(keys.group(self.priority, self.group)))
                else:
                    self._count = int(client.zcard(getattr(keys, _ZSETS[self.state][0])))
        return self._count

    def __len__(self) -> int:
        return self.count()

    @overload
    def __getitem__(self, index: int) -> Row: ...
    @overload
    def __getitem__(self, index: slice) -> list[Row]: ...
    def __getitem__(self, index: int | slice) -> Row | list[Row]:
        if isinstance(index, int):
            return self[index : index + 1][0]
        start, stop = index.start or 0, index.stop
        if stop is None or stop <= start:
            return []
        ids, scores = self.ids(start, stop - 1)
        jobs = read_jobs(self.queue, ids)
        return [Row(i, j, ms_to_datetime(s)) for i, j, s in zip(ids, jobs, scores, strict=True)]

    def ids(self, start: int, end: int) -> tuple[list[str], list[float | None]]:
        """Ids (and scores) at ranks ``start..end`` inclusive, in display order."""
        ref = queue_ref(self.queue)
        keys, client = ref.keys, ref.client()
        with redis_errors(client):
            if self.state is JobStatus.QUEUED:
                raw = client.lrange(keys.group(self.priority, self.group), start, end)
                return [as_text(i) for i in raw], [None] * len(raw)
            name, newest_first = _ZSETS[self.state]
            read = client.zrevrange if newest_first else client.zrange
            pairs: list[tuple[bytes, float]] = read(  # type: ignore[assignment]
                getattr(keys, name), start, end, withscores=True
            )
        return [as_text(i) for i, _ in pairs], [float(s) for _, s in pairs]


@dataclass
class FailedPage:
    """A page of the failed jobs of several queues, newest first (:func:`failed_across`)."""

    rows: list[Row]
    #: Per queue, how many of its failed jobs this page and the ones before it showed.
    offsets: list[int]
    #: The offsets of the next page, or ``None`` when this is the last one.
    next_offsets: list[int] | None
    #: Failed jobs in the queues that answered.
    total: int
    #: ``(queue, error)`` for each queue whose Redis could not be read.
    errors: list[tuple[str, str]] = field(default_factory=list)


def failed_across(queues: Sequence[str], offsets: Sequence[int], size: int) -> FailedPage:
    """Up to ``size`` failed jobs of ``queues``, newest first, after the first ``offsets[i]``
    of each queue's failed store (a page's ``next_offsets`` lead to the next page).

    Each queue's store is a zset scored by the failure time, so a page reads at most
    ``size`` ids per queue (one ``ZCARD`` and one ``ZREVRANGE`` in one round trip per
    queue), merges them by time and keeps the newest ``size``; only their records are
    read. A failure between two pages may show a job twice, as with any pager.
    """
    offsets = [max(0, o) for o in offsets]
    found: list[tuple[float, int, str]] = []
    cards: dict[int, int] = {}
    errors = []
    for index, (queue, offset) in enumerate(zip(queues, offsets, strict=True)):
        ref = queue_ref(queue)
        keys = ref.keys
        try:
            client = ref.client()
            with redis_errors(client):
                pipe = client.pipeline(transaction=False)
                pipe.zcard(keys.failed)
                pipe.zrevrange(keys.failed, offset, offset + size - 1, withscores=True)
                card, pairs = pipe.execute()
        except RedisUnavailable as exc:
            errors.append((queue, str(exc)))
            continue
        cards[index] = int(card)
        found += [(float(score), index, as_text(job_id)) for job_id, score in pairs]
    # Newest first; ties keep each queue's own order (stable sort), then queue order.
    found.sort(key=lambda item: -item[0])
    page = found[:size]
    taken = [0] * len(queues)
    for _score, index, _id in page:
        taken[index] += 1
    jobs: dict[str, Job[Any] | None] = {}
    for index, queue in enumerate(queues):
        ids = [job_id for _s, i, job_id in page if i == index]
        if ids:
            try:
                jobs.update(zip(ids, read_jobs(queue, ids), strict=True))
            except RedisUnavailable as exc:
                errors.append((queue, str(exc)))
    after = [offset + taken[i] for i, offset in enumerate(offsets)]
    more = any(after[i] < card for i, card in cards.items())
    return FailedPage(
        rows=[Row(job_id, jobs.get(job_id), ms_to_datetime(score)) for score, _i, job_id in page],
        offsets=offsets,
        next_offsets=after if more else None,
        total=sum(cards.values()),
        errors=errors,
    )


@dataclass
class FilteredPage:
    """A page of jobs matching a name, found by a bounded scan from ``cursor``."""

    rows: list[Row]
    #: Rank to continue from, or ``None`` when the scan reached the end.
    next_cursor: int | None
    scanned: int


def filtered_page(source: JobSource, name: str, cursor: int, size: int) -> FilteredPage:
    """Up to ``size`` jobs named ``name`` from rank ``cursor`` on, scanning at most
    :data:`SCAN_LIMIT` ids (names read with ``HGET`` in pipelined chunks)."""
    ref = queue_ref(source.queue)
    keys, client = ref.keys, ref.client()
    matches: list[tuple[str, float | None]] = []
    position, scanned = cursor, 0
    while scanned < SCAN_LIMIT and len(matches) < size:
        ids, scores = source.ids(position, position + SCAN_CHUNK - 1)
        if not ids:
            return _finish(source, matches, None, scanned)
        with redis_errors(client):
            pipe = client.pipeline(transaction=False)
            for job_id in ids:
                pipe.hget(keys.job(job_id), JobFields.NAME)
            names = pipe.execute(raise_on_error=False)
        for offset, (job_id, score, found) in enumerate(zip(ids, scores, names, strict=True)):
            if isinstance(found, Exception):
                if not wrong_type(found):
                    raise found
                continue  # not a job hash: it has no name to match
            if found is not None and as_text(found) == name:
                matches.append((job_id, score))
                if len(matches) == size:
                    return _finish(source, matches, position + offset + 1, scanned + offset + 1)
        position += len(ids)
        scanned += len(ids)
        if len(ids) < SCAN_CHUNK:
            return _finish(source, matches, None, scanned)
    return _finish(source, matches, position, scanned)


def _finish(
    source: JobSource, matches: list[tuple[str, float | None]], cursor: int | None, scanned: int
) -> FilteredPage:
    if cursor is not None and cursor >= source.count():
        cursor = None  # the window ended exactly at the end of the list
    ids = [m[0] for m in matches]
    jobs = read_jobs(source.queue, ids)
    rows = [Row(i, j, ms_to_datetime(s)) for (i, s), j in zip(matches, jobs, strict=True)]
    return FilteredPage(rows, cursor, scanned)


@dataclass
class GroupRow:
    group: str
    backlog: int
    next_job: str
    #: At its ``group_concurrency`` cap: out of the ring until one of its running jobs ends.
    parked: bool = False


def _parked(client: redis.Redis, keys: QueueKeys) -> dict[int, list[str]]:
    """Groups parked at their ``group_concurrency`` cap, by priority, sorted by name.

    Bounded: a group is full only while at least one of its jobs runs, so
    there are at most as many as running jobs. Two round trips.
    """
    full = sorted(as_text(g) for g in client.smembers(keys.groupfull))
    if not full:
        return {}
    pipe = client.pipeline(transaction=False)
    for group in full:
        pipe.smembers(keys.parked(group))
    found: dict[int, list[str]] = {}
    for group, levels in zip(full, pipe.execute(), strict=True):
        for level in levels:
            found.setdefault(int(level), []).append(group)
    return found


def priorities(queue: str) -> list[int]:
    """Priority levels with queued jobs, highest first (at most 201), parked groups' included."""
    ref = queue_ref(queue)
    keys, client = ref.keys, ref.client()
    with redis_errors(client):
        raw: list[bytes] = client.zrevrange(keys.prios, 0, -1)  # type: ignore[assignment]
        parked = _parked(client, keys)
    return sorted({int(p) for p in raw} | set(parked), reverse=True)


def group_count(queue: str, priority: int) -> int:
    """Groups with queued jobs at ``priority``: those in its ring and those parked there."""
    ref = queue_ref(queue)
    keys, client = ref.keys, ref.client()
    with redis_errors(client):
        return int(client.llen(keys.ring(priority))) + len(_parked(client, keys).get(priority, []))


def groups(queue: str, priority: int, start: int, end: int) -> list[GroupRow]:
    """Groups at ``priority`` in serving order (ranks ``start..end``, ``end`` -1: the last),
    with backlog: the ring's, then the groups parked at their ``group_concurrency`` cap
    (they rejoin the ring's tail when one of their running jobs ends)."""
    ref = queue_ref(queue)
    keys, client = ref.keys, ref.client()
    with redis_errors(client):
        in_ring = int(client.llen(keys.ring(priority)))
        parked = _parked(client, keys).get(priority, [])
        if end < 0:
            end += in_ring + len(parked)
        names = [as_text(g) for g in client.lrange(keys.ring(priority), start, end)]
        waiting = parked[max(0, start - in_ring) : max(0, end + 1 - in_ring)]
        pipe = client.pipeline(transaction=False)
        for name in names + waiting:
            pipe.llen(keys.group(priority, name))
            pipe.lindex(keys.group(priority, name), 0)
        replies: list[Any] = pipe.execute()
    return [
        GroupRow(name, int(replies[2 * n]), as_text(replies[2 * n + 1] or b""), n >= len(names))
        for n, name in enumerate(names + waiting)
    ]
