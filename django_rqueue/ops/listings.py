"""Listings of jobs for the admin and the commands: pages of a state, of failed stores, of groups.

Every function here costs a bounded number of round trips and reads a
bounded amount of data, whatever the size of the queue: listings are
``ZRANGE``/``LRANGE`` slices whose job hashes are read in one pipeline, and a
name filter scans at most :data:`SCAN_LIMIT` ids per request and hands back a
cursor. Nothing here uses ``KEYS`` or ``SCAN``.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import redis

from ..conf import get_config
from ..engine.connection import as_text, ms_to_datetime, redis_errors, wrong_type
from ..engine.fields import JobFields
from ..engine.keys import QueueKeys, queue_of
from ..engine.queue_ref import queue_ref
from ..exceptions import RedisUnavailable
from ..job import Job, JobStatus

#: Job states that have a listing (cancelled jobs have none), in display order.
STATES: tuple[JobStatus, ...] = (
    JobStatus.WAITING,
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

# state -> (QueueKeys attribute of the zset, newest first?)
_ZSETS = {
    # Scored by the dependency deadline (+inf: none, listed last): the soonest first.
    JobStatus.WAITING: ("waiting", False),
    JobStatus.SCHEDULED: ("delayed", False),
    JobStatus.RUNNING: ("reserved", False),
    JobStatus.FAILED: ("failed", True),
    JobStatus.SUCCEEDED: ("succeeded", True),
}


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
    #: The zset score as a time (dependency deadline, run-at, lease deadline, failed-at…);
    #: ``None`` for lists, and for a waiting job without a dependency deadline.
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
    """A group as :func:`groups` lists it: how many jobs it has queued (``backlog``) and the
    id of the next one to run (``next_job``)."""

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
