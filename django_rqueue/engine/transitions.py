"""The queue's state transitions: one Python function per Lua script.

Each function takes the queue's Redis client and :class:`~.keys.QueueKeys`,
passes every key the script names in ``KEYS``, and translates the reply.
Times are decided inside the scripts from Redis ``TIME``; durations passed
in are milliseconds. Redis connection problems are raised as
:class:`~.exceptions.RedisUnavailable`; a stale fencing token as
:class:`~.exceptions.LeaseLost`; an action that does not apply to the job's
state as :class:`~.exceptions.JobStateError`. Nothing is written in any of
those cases.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple

import redis
import redis.asyncio
from redis.exceptions import NoScriptError, RedisClusterException

from ..conf import RateLimit
from ..exceptions import JobStateError, LeaseLost
from . import calls
from .calls import (
    CancelMode,
    FailedBatchMode,
    NewJob,
    Retention,
    ScriptCall,
    applied,
    stale_lease,
)
from .connection import as_text, redis_errors, unavailable
from .keys import QueueKeys
from .pipelining import pipelined
from .scripts import load


def _run(
    client: redis.Redis, call: ScriptCall, meanwhile: Callable[[], object] | None = None
) -> Any:  # a Lua reply
    """Run ``call`` and return its reply (``RedisUnavailable``: Redis unreachable)."""
    try:  # as redis_errors(client), without making a context manager on every call
        return load(call.script)(client, call.keys, call.args, meanwhile)
    except (redis.RedisError, RedisClusterException) as exc:
        found = unavailable(exc, client)
        if found is None:
            raise
        raise found from exc


async def _arun(client: redis.asyncio.Redis, call: ScriptCall) -> Any:  # a Lua reply
    """:func:`_run` on an asyncio client."""
    try:
        return await load(call.script).acall(client, call.keys, call.args)
    except (redis.RedisError, RedisClusterException) as exc:
        found = unavailable(exc, client)
        if found is None:
            raise
        raise found from exc


class ReplicaWait(NamedTuple):
    """``WAIT <replicas> <timeout_ms>`` sent right after a write, on the write's connection."""

    replicas: int
    #: Milliseconds (> 0: Redis reads 0 as "wait forever").
    timeout_ms: int


def _run_and_wait(client: redis.Redis, call: ScriptCall, wait: ReplicaWait) -> tuple[Any, int]:
    """Run ``call``, then ``WAIT``, in one pipeline: ``(the script's reply, replicas)``.

    ``WAIT`` counts the replicas that acknowledged every write made so far on
    *its own* connection (https://redis.io/docs/latest/commands/wait/), so the
    write and the ``WAIT`` go in one pipeline: one connection, one round trip.
    A ``NOSCRIPT`` reply (Redis lost its script cache) loads the script and
    sends both again. Raises ``RedisUnavailable`` as :func:`_run`.
    """
    script = load(call.script)
    with redis_errors(client):
        for _attempt in range(2):
            pipe = client.pipeline(transaction=False)
            script.queue_in(pipe, call.keys, call.args)
            pipe.wait(wait.replicas, wait.timeout_ms)
            reply, acked = pipe.execute(raise_on_error=False)
            if not isinstance(reply, NoScriptError):
                break
            client.script_load(script.source)
    return _waited(reply, acked)


async def _arun_and_wait(
    client: redis.asyncio.Redis, call: ScriptCall, wait: ReplicaWait
) -> tuple[Any, int]:
    """:func:`_run_and_wait` on an asyncio client."""
    script = load(call.script)
    with redis_errors(client):
        for _attempt in range(2):
            pipe = client.pipeline(transaction=False)
            pipe.evalsha(script.sha, len(call.keys), *call.keys, *call.args)
            pipe.wait(wait.replicas, wait.timeout_ms)
            reply, acked = await pipe.execute(raise_on_error=False)
            if not isinstance(reply, NoScriptError):
                break
            await client.script_load(script.source)
    return _waited(reply, acked)


def _waited(reply: Any, acked: Any) -> tuple[Any, int]:  # a Lua reply and WAIT's
    for value in (reply, acked):
        if isinstance(value, Exception):
            raise value
    return reply, int(acked)


def _refused(reply: list[Any], job_id: str, message: str) -> JobStateError:
    """The :class:`JobStateError` of a refusal ``{status, state}``.

    ``message`` is formatted with ``job_id`` and ``state`` (``"missing"`` when
    the job is gone; ``.state`` is then ``None``).
    """
    state = as_text(reply[1]) or None
    return JobStateError(message.format(job_id=job_id, state=state or "missing"), state)


class EnqueueOutcome(enum.StrEnum):
    """What ``enqueue.lua`` / ``enqueue_batch.lua`` did with one job."""

    CREATED = "created"
    #: Another pending job holds the unique key (its id is returned instead).
    DUPLICATE = "duplicate"
    #: This job id was already enqueued (a resent call): nothing written.
    EXISTS = "exists"


#: ``(outcome, job id, state)`` of one enqueued job: the id is the holder's for a duplicate.
Enqueued = tuple[EnqueueOutcome, str, str]


class EnqueueReply(NamedTuple):
    """What ``enqueue.lua`` answered for one job (:data:`Enqueued`, and when it was written)."""

    outcome: EnqueueOutcome
    #: The holder's id for a duplicate.
    job_id: str
    state: str
    #: When a created job was enqueued, as its record holds it (Redis server time, ms since
    #: the epoch); ``None`` for the other outcomes.
    enqueued_ms: int | None


def enqueue(
    client: redis.Redis, call: ScriptCall, meanwhile: Callable[[], object] | None = None
) -> EnqueueReply:
    """Create a job (``enqueue.lua``), given its call (:meth:`.calls.EnqueueShared.call`).

    Returns ``(outcome, job id, state, enqueued_ms)`` (:class:`EnqueueReply`).
    """
    return _enqueue_reply(_run(client, call, meanwhile))


async def aenqueue(client: redis.asyncio.Redis, call: ScriptCall) -> EnqueueReply:
    """:func:`enqueue` on an asyncio client."""
    return _enqueue_reply(await _arun(client, call))


#: The script's outcome as redis-py returns it (bytes, or str with ``decode_responses``).
_OUTCOMES: dict[bytes | str, EnqueueOutcome] = {
    **{outcome.value: outcome for outcome in EnqueueOutcome},
    **{outcome.value.encode(): outcome for outcome in EnqueueOutcome},
}


def _enqueued(reply: list[Any]) -> Enqueued:
    outcome = _OUTCOMES.get(reply[0])
    if outcome is None:
        raise ValueError(f"enqueue: unknown outcome {reply[0]!r}")
    return outcome, as_text(reply[1]), as_text(reply[2])


def _enqueue_reply(reply: list[Any]) -> EnqueueReply:
    outcome, job_id, state = _enqueued(reply)
    return EnqueueReply(outcome, job_id, state, int(reply[3]) if len(reply) > 3 else None)


def _confirmed(outcomes: Iterable[EnqueueOutcome], acked: int) -> int:
    """The replicas known to have the jobs: ``WAIT``'s count, or 0 after a resent write.

    ``exists`` means an earlier send of this same call (its connection lost
    before the reply) wrote the job; the ``WAIT`` of the new connection says
    nothing about that write, so its replication is unknown.
    """
    return 0 if EnqueueOutcome.EXISTS in outcomes else acked


def enqueue_and_wait(
    client: redis.Redis, call: ScriptCall, wait: ReplicaWait
) -> tuple[EnqueueReply, int]:
    """:func:`enqueue` given its call (:meth:`.calls.EnqueueShared.call`), then ``WAIT`` on the same
    connection (:class:`ReplicaWait`): ``(enqueued, replicas known to have the job)``."""
    reply, acked = _run_and_wait(client, call, wait)
    enqueued = _enqueue_reply(reply)
    return enqueued, _confirmed([enqueued.outcome], acked)


async def aenqueue_and_wait(
    client: redis.asyncio.Redis, call: ScriptCall, wait: ReplicaWait
) -> tuple[EnqueueReply, int]:
    """:func:`enqueue_and_wait` on an asyncio client."""
    reply, acked = await _arun_and_wait(client, call, wait)
    enqueued = _enqueue_reply(reply)
    return enqueued, _confirmed([enqueued.outcome], acked)


class BatchItem(NamedTuple):
    """One job of :func:`enqueue_batch`: what differs between the jobs of a batch."""

    job_id: str
    unique_key: str
    payload: str


def enqueue_batches(
    client: redis.Redis,
    shared: calls.BatchShared,
    items: Sequence[BatchItem],
    *,
    batch_size: int = 500,
) -> Iterator[list[Enqueued]]:
    """Create many jobs that share their options (``enqueue_batch.lua``, one call per batch),
    yielding each batch's outcome as it is known: one ``(outcome, job id, state)`` per item
    of the batch, as :func:`enqueue`, batch after batch in the order of ``items``.

    ``shared``: the queue and the options every job of ``items`` is written
    with (:class:`~.calls.BatchShared`), each item's payload as its
    ``payload`` field. Batches of ``batch_size`` items are written in order,
    each atomically, pipelined two deep on one connection
    (:func:`~.pipelining.pipelined`: the next batch is encoded while Redis
    writes the one before). A batch yielded is written; when the generator
    raises, the batch after the last one yielded may or may not have been
    written, and so may the one after it (it was sent, two deep); later ones
    were not. A resent batch is a no-op for the items it already wrote (they
    report ``"exists"``), so sending the rest again is safe.

    Raises:
        RedisUnavailable: Redis cannot be reached, or (a cluster) the queue's slot is moving.
        redis.ResponseError: the script refused its arguments (nothing of that batch written).
    """
    with_unique = any(item.unique_key for item in items)
    starts = range(0, len(items), batch_size)

    def batches() -> Iterator[ScriptCall]:
        for start in starts:
            yield shared.call(
                (
                    (item.job_id, item.payload, item.unique_key)
                    for item in items[start : start + batch_size]
                ),
                with_unique=with_unique,
            )

    with redis_errors(client):
        written = pipelined(client, load("enqueue_batch"), ((c.keys, c.args) for c in batches()))
        for start, reply in zip(starts, written, strict=True):
            yield _batch_enqueued(items[start : start + batch_size], reply)


def enqueue_batch(
    client: redis.Redis,
    shared: calls.BatchShared,
    items: Sequence[BatchItem],
    *,
    batch_size: int = 500,
) -> list[Enqueued]:
    """:func:`enqueue_batches`, the outcomes of every batch in one list (in item order).

    Raises what :func:`enqueue_batches` raises; the batches written before stay written.
    """
    batches = enqueue_batches(client, shared, items, batch_size=batch_size)
    return [enqueued for batch in batches for enqueued in batch]


def existing_jobs(client: redis.Redis, keys: QueueKeys, job_ids: Sequence[str]) -> list[bool]:
    """Whether the record of each of ``job_ids`` exists (one pipelined ``EXISTS`` each).

    Raises:
        RedisUnavailable: Redis cannot be reached.
    """
    with redis_errors(client):
        pipe = client.pipeline(transaction=False)
        for job_id in job_ids:
            pipe.exists(keys.job(job_id))
        return [bool(found) for found in pipe.execute()]


def enqueue_batch_and_wait(
    client: redis.Redis, shared: calls.BatchShared, items: Sequence[BatchItem], wait: ReplicaWait
) -> tuple[list[Enqueued], int]:
    """One batch of :func:`enqueue_batch` (all of ``items`` in one call), then ``WAIT`` on the
    same connection (:class:`ReplicaWait`): ``(enqueued, replicas known to have the jobs)``."""
    call = shared.call(
        ((item.job_id, item.payload, item.unique_key) for item in items),
        with_unique=any(item.unique_key for item in items),
    )
    reply, acked = _run_and_wait(client, call, wait)
    enqueued = _batch_enqueued(items, reply)
    return enqueued, _confirmed((outcome for outcome, _, _ in enqueued), acked)


def _batch_enqueued(items: Sequence[BatchItem], reply: list[Any]) -> list[Enqueued]:
    """One ``enqueue_batch.lua`` reply as an :data:`Enqueued` per item of its batch.

    The reply is the state of created jobs, then ``index, outcome, id, state``
    for every item that was not simply created.
    """
    state = as_text(reply[0])
    batch = [(EnqueueOutcome.CREATED, item.job_id, state) for item in items]
    for i in range(1, len(reply), 4):
        batch[int(reply[i]) - 1] = (
            EnqueueOutcome(as_text(reply[i + 1])),
            as_text(reply[i + 2]),
            as_text(reply[i + 3]),
        )
    return batch


#: A reservation: ``(job id, job hash as HGETALL returns it)``.
Reservation = tuple[str, dict[bytes, bytes]]


class Reserved(NamedTuple):
    """What one reserving call handed out."""

    #: The reservations, in the order :func:`reserve` would have handed them out one by one.
    jobs: list[Reservation]
    #: 0, or, when the queue's rate limit handed out fewer jobs than asked while more
    #: are queued, the milliseconds (Redis clock) until it lets the next one go: asking
    #: again sooner gets nothing.
    wait_ms: int = 0


def _reservation(reply: list[Any]) -> Reservation:
    it = iter(reply[1:])
    return as_text(reply[0]), dict(zip(it, it, strict=True))


def _reserved(reply: list[Any]) -> Reserved:
    """Read ``{wait, reservation, ...}`` (``reserve.lua``, the tail of ``ack_reserve.lua``)."""
    return Reserved([_reservation(item) for item in reply[1:]], int(reply[0]))


def reserve(
    client: redis.Redis,
    keys: QueueKeys,
    *,
    lease_ms: int,
    worker_id: str,
    group_concurrency: int | None = None,
    rate_limit: RateLimit | None = None,
) -> Reservation | None:
    """Reserve the next job (``reserve.lua``): ``(job id, job hash)`` or ``None`` when empty
    (or held back by ``rate_limit``).

    ``group_concurrency``, ``rate_limit``: as :func:`reserve_many`.
    """
    got = reserve_many(
        client,
        keys,
        lease_ms=lease_ms,
        worker_id=worker_id,
        count=1,
        group_concurrency=group_concurrency,
        rate_limit=rate_limit,
    )
    return got.jobs[0] if got.jobs else None


def reserve_many(
    client: redis.Redis,
    keys: QueueKeys,
    *,
    lease_ms: int,
    worker_id: str,
    count: int,
    request_id: str | None = None,
    group_concurrency: int | None = None,
    rate_limit: RateLimit | None = None,
) -> Reserved:
    """Reserve up to ``count`` jobs (1..1000) in one round trip (``reserve.lua``).

    Returns the reservations in the order :func:`reserve` would have handed
    them out one by one (priority, then round-robin between groups, then
    FIFO); fewer than ``count``, or none, when the queue runs dry. Each job
    has its own lease deadline (now + ``lease_ms``) and fencing token.
    ``request_id`` (default: a fresh random one) makes the call idempotent:
    the same call resent, as redis-py does after a broken connection, returns
    the jobs the first one reserved instead of reserving more.

    ``group_concurrency`` (the queue's ``group_concurrency`` setting, ``>= 1``;
    ``None``: no cap): each job reserved holds one of its group's slots until
    its run ends (ack, fail, reclaim, release), and a group whose slots are
    all held is skipped (parked) until one is given back; see
    ``include/reserve_next.lua``. Fewer jobs, or none, may then come back
    while others are queued.

    ``rate_limit`` (the queue's ``rate_limit``; ``None``: unlimited) is
    enforced across every worker on the Redis clock; when it holds jobs back,
    :attr:`Reserved.wait_ms` says when to ask again.

    Raises:
        redis.ResponseError: ``count`` or ``group_concurrency`` is out of range
            (nothing reserved).
    """
    request = request_id or new_request_id()
    call = calls.reserve(
        keys,
        lease_ms=lease_ms,
        worker_id=worker_id,
        count=count,
        request_id=request,
        group_cap=group_concurrency,
        rate_limit=rate_limit,
    )
    return _reserved(_run(client, call))


def reserve_command(call: ScriptCall) -> list[str | int | float]:
    """A reserve call (:func:`.calls.reserve`, with its ``request_id``) as a bare ``EVALSHA``
    command (``[name, *arguments]``), to send behind another command in one write (the idle
    ``BLPOP``: :mod:`~..worker.idle`).

    Its reply is read with :func:`reserved_from`. Redis answers ``NOSCRIPT`` when it
    lost the script: send the call again with :func:`reserve_call` (the same request id),
    which loads the script (and returns the jobs, if the first send ran after all).
    """
    return ["EVALSHA", load(call.script).sha, len(call.keys), *call.keys, *call.args]


def reserve_call(client: redis.Redis, call: ScriptCall) -> Reserved:
    """:func:`reserve_many` given its call (:func:`.calls.reserve`): sent again with the same
    request id, it returns the jobs the first send reserved instead of reserving more."""
    return _reserved(_run(client, call))


def reserved_from(reply: Any) -> Reserved:  # a Lua reply
    """Read the reply of a :func:`reserve_command` (``{wait, reservation, ...}``).

    Raises:
        redis.ResponseError: the reply is an error (``NOSCRIPT``, bad arguments).
    """
    if isinstance(reply, redis.ResponseError):
        raise reply
    return _reserved(reply)


async def areserve_many(
    client: redis.asyncio.Redis,
    keys: QueueKeys,
    *,
    lease_ms: int,
    worker_id: str,
    count: int,
    request_id: str | None = None,
    group_concurrency: int | None = None,
    rate_limit: RateLimit | None = None,
) -> Reserved:
    """:func:`reserve_many` on an asyncio client (``request_id``: default a fresh one)."""
    call = calls.reserve(
        keys,
        lease_ms=lease_ms,
        worker_id=worker_id,
        count=count,
        request_id=request_id or new_request_id(),
        group_cap=group_concurrency,
        rate_limit=rate_limit,
    )
    return await areserve_call(client, call)


async def areserve_call(client: redis.asyncio.Redis, call: ScriptCall) -> Reserved:
    """:func:`reserve_call` on an asyncio client: sent again with the same request id, it
    returns the jobs the first send reserved instead of reserving more."""
    return _reserved(await _arun(client, call))


def new_request_id() -> str:
    """A random id for one reserve call (16 hex digits)."""
    return os.urandom(8).hex()


def ack_and_reserve(
    client: redis.Redis,
    keys: QueueKeys,
    job_id: str,
    token: int,
    result: str,
    result_ttl: int,
    *,
    lease_ms: int,
    worker_id: str,
    count: int = 1,
    request_id: str | None = None,
    group_concurrency: int | None = None,
    rate_limit: RateLimit | None = None,
) -> tuple[LeaseLost | None, Reserved]:
    """:func:`ack`, then :func:`reserve_many` on the same queue, in one call (``ack_reserve.lua``).

    The ack gives its job's group slot back before the reservations are made
    (``group_concurrency``, ``rate_limit``: as :func:`reserve_many`).

    Returns ``(stale, reserved)``: ``stale`` is ``None`` when the ack was
    applied, else the :class:`LeaseLost` that :func:`ack` would have raised
    (returned, not raised, so that the reservations made in the same call are
    never dropped); ``reserved`` as :func:`reserve_many` (up to ``count``;
    idempotent per ``request_id`` the same way). After :class:`RedisUnavailable`
    send a plain :func:`ack`: a new call would reserve more jobs.
    """
    request = request_id or new_request_id()
    call = calls.ack_reserve(
        keys,
        job_id,
        token,
        result,
        result_ttl,
        lease_ms=lease_ms,
        worker_id=worker_id,
        count=count,
        request_id=request,
        group_cap=group_concurrency,
        rate_limit=rate_limit,
    )
    acked, *rest = _run(client, call)
    stale = None if applied(acked, token) else stale_lease(job_id, acked)
    return stale, _reserved(rest)


def renew_lease(
    client: redis.Redis, keys: QueueKeys, job_id: str, token: int, lease_ms: int
) -> int:
    """Extend a running job's lease (``renew.lua``); return the new deadline in ms."""
    reply = _run(client, calls.renew(keys, job_id, token, lease_ms))
    if as_text(reply[0]) != "ok":
        raise stale_lease(job_id, reply)
    return int(reply[1])


def ack(
    client: redis.Redis, keys: QueueKeys, job_id: str, token: int, result: str, result_ttl: int
) -> None:
    """Record success (``ack.lua``); the record expires after ``result_ttl`` seconds."""
    reply = _run(client, calls.ack(keys, job_id, token, result, result_ttl))
    if not applied(reply, token):
        raise stale_lease(job_id, reply)


def fail(
    client: redis.Redis,
    keys: QueueKeys,
    job_id: str,
    token: int,
    error: str,
    retry_delay_ms: int,
    *,
    retention: Retention,
) -> tuple[str, int | None]:
    """Record a failed attempt (``fail.lua``).

    ``retry_delay_ms`` ``-1`` forbids a retry. Returns ``("retrying", run-at
    ms)`` or ``("failed", None)``. A job that goes to the failed store makes
    it apply ``retention`` (the oldest failed jobs beyond it are deleted, at
    most ``retention.limit`` of them).
    """
    reply = _run(client, calls.fail(keys, job_id, token, error, retry_delay_ms, retention))
    outcome = as_text(reply[0])
    if outcome == "stale":
        state, current = as_text(reply[1]), as_text(reply[2])
        # Our own token with the job already scheduled/failed: an earlier try
        # of this report was applied and its reply lost (fail is idempotent).
        if current == str(token) and state == "scheduled":
            return "retrying", None
        if current == str(token) and state == "failed":
            return "failed", None
        raise stale_lease(job_id, reply)
    return outcome, (int(reply[1]) if outcome == "retrying" else None)


def release(client: redis.Redis, keys: QueueKeys, job_id: str, token: int) -> None:
    """Hand a running job back without spending an attempt (``release.lua``)."""
    reply = _run(client, calls.release(keys, job_id, token))
    if as_text(reply[0]) != "ok":
        raise stale_lease(job_id, reply)


def cancel_running(
    client: redis.Redis, keys: QueueKeys, job_id: str, token: int, *, ttl: int
) -> None:
    """End a running job as cancelled, keeping its record ``ttl`` s (0: delete it)
    (``cancel_running.lua``).

    Raises:
        LeaseLost: ``token`` is stale (the job finished or was reclaimed meanwhile).
    """
    reply = _run(client, calls.cancel_running(keys, job_id, token, ttl))
    if as_text(reply[0]) != "ok":
        raise stale_lease(job_id, reply)


def promote_due(client: redis.Redis, keys: QueueKeys, limit: int) -> tuple[int, int]:
    """Queue due scheduled jobs (``promote.lua``).

    Returns ``(promoted, ms until the next due job)``; the second is ``-1``
    when nothing is scheduled and ``0`` when more are due right now.
    """
    reply = _run(client, calls.promote(keys, limit))
    return int(reply[0]), int(reply[1])


def reclaim_expired(
    client: redis.Redis, keys: QueueKeys, limit: int, error: str, *, retention: Retention
) -> tuple[int, int, int]:
    """Take back jobs whose lease expired (``reclaim.lua``).

    Returns ``(requeued, failed, ms until the next lease deadline)`` with the
    same ``-1``/``0`` conventions as :func:`promote_due`. When jobs went to
    the failed store, ``retention`` is applied to it as :func:`fail` does.
    """
    reply = _run(client, calls.reclaim(keys, limit, error, retention))
    return int(reply[0]), int(reply[1]), int(reply[2])


def trim_failed(client: redis.Redis, keys: QueueKeys, retention: Retention) -> tuple[int, bool]:
    """Apply ``retention`` to the failed store now (``trim_failed.lua``).

    Deletes the oldest failed jobs (record, error history, ``Job.wait`` list)
    while there are more than ``retention.max_jobs`` or the oldest failed
    ``retention.ttl`` seconds ago or more, at most ``retention.limit`` of
    them. Returns ``(deleted, more)``: ``more`` when the limit was reached
    and another call may delete more.
    """
    reply = _run(client, calls.trim_failed(keys, retention))
    return int(reply[0]), int(reply[1]) == 1


def retry_failed(client: redis.Redis, keys: QueueKeys, job_id: str) -> None:
    """Re-queue a failed job with attempts reset to 0 (``retry.lua``)."""
    reply = _run(client, calls.retry(keys, job_id))
    if as_text(reply[0]) != "ok":
        raise _refused(reply, job_id, "job {job_id} is {state}, not failed")


def cancel(client: redis.Redis, keys: QueueKeys, job_id: str, *, mode: CancelMode, ttl: int) -> str:
    """Cancel (keep the record ``ttl`` s) or delete a job that is not running (``cancel.lua``);
    mode ``"cancel"`` on a running job asks its worker to stop it.

    Returns the state the job was in (``"running"``: the stop was requested; the job
    ends ``cancelled`` when its worker has stopped it).

    Raises:
        JobStateError: mode ``"delete"`` of a running job, or a job that finished or is gone.
    """
    reply = _run(client, calls.cancel(keys, job_id, mode, ttl))
    if as_text(reply[0]) == "requested":
        return as_text(reply[1])
    if as_text(reply[0]) != "ok":
        raise _refused(reply, job_id, f"cannot {mode} job {{job_id}}: it is {{state}}")
    return as_text(reply[1])


def read_job(client: redis.Redis, keys: QueueKeys, job_id: str) -> dict[bytes, bytes]:
    """Read a job hash (a plain ``HGETALL``; reads need no script)."""
    with redis_errors(client):
        return client.hgetall(keys.job(job_id))  # type: ignore[return-value]


async def aread_job(
    client: redis.asyncio.Redis, keys: QueueKeys, job_id: str
) -> dict[bytes, bytes]:
    """:func:`read_job` on an asyncio client."""
    with redis_errors(client):
        return await client.hgetall(keys.job(job_id))  # type: ignore[return-value]


def run_now(client: redis.Redis, keys: QueueKeys, job_id: str) -> None:
    """Queue a scheduled job at once (``run_now.lua``).

    Raises:
        JobStateError: the job is not scheduled (``.state`` tells what it is).
    """
    reply = _run(client, calls.run_now(keys, job_id))
    if as_text(reply[0]) != "ok":
        raise _refused(reply, job_id, "job {job_id} is {state}, not scheduled")


def failed_batch(
    client: redis.Redis,
    keys: QueueKeys,
    *,
    mode: FailedBatchMode,
    limit: int,
    offset: int,
    upto_ms: int,
    name: str = "",
) -> tuple[int, int, int, int]:
    """Retry or delete one batch of failed jobs (``failed_batch.lua``).

    Returns ``(done, skipped, stale, scanned)``: see the script's header.
    """
    call = calls.failed_batch(
        keys, mode=mode, limit=limit, offset=offset, upto_ms=upto_ms, name=name
    )
    reply = _run(client, call)
    return int(reply[0]), int(reply[1]), int(reply[2]), int(reply[3])


def empty_queue(client: redis.Redis, keys: QueueKeys, limit: int) -> tuple[int, int, bool]:
    """Delete up to ``limit`` queued jobs of the queue, in serving order (``empty_queue.lua``).

    Returns ``(deleted, dropped, more)``: jobs deleted, stale ids dropped from the
    lists, and whether queued jobs are left (call again).
    """
    reply = _run(client, calls.empty_queue(keys, limit))
    return int(reply[0]), int(reply[1]), int(reply[2]) == 1


class ClaimOutcome(enum.StrEnum):
    """What ``schedule_claim.lua`` did with one due tick, besides :class:`EnqueueOutcome`."""

    #: Another poller claimed this tick first (or the entry is gone): nothing written.
    TAKEN = "taken"
    #: The entry is paused: the tick was passed over and nothing enqueued.
    PAUSED = "paused"


class DueEntries(NamedTuple):
    """What ``schedule_due.lua`` read."""

    #: Redis time, ms since the epoch.
    now_ms: int
    #: ``(entry, tick ms)`` of the due entries, earliest tick first.
    due: list[tuple[str, int]]
    #: The tick (ms) of the first entry not due yet; ``-1``: none; ``0``: more may be due.
    next_ms: int


def schedule_sync(
    client: redis.Redis, keys: QueueKeys, entries: Sequence[tuple[str, str, int]]
) -> tuple[int, int]:
    """Store a queue's periodic entries ``(name, spec, first tick ms)`` (``schedule_sync.lua``).

    Returns ``(entries set or reset, entries removed)``; see the script's header.
    """
    reply = _run(client, calls.schedule_sync(keys, entries))
    return int(reply[0]), int(reply[1])


def schedule_due(client: redis.Redis, keys: QueueKeys, limit: int) -> DueEntries:
    """Read up to ``limit`` due periodic entries of a queue (``schedule_due.lua``)."""
    reply = _run(client, calls.schedule_due(keys, limit))
    pairs = iter(reply[2:])
    due = [(as_text(entry), int(float(tick))) for entry, tick in zip(pairs, pairs, strict=True)]
    return DueEntries(int(reply[0]), due, int(float(reply[1])))


def schedule_claim(
    client: redis.Redis,
    keys: QueueKeys,
    job: NewJob,
    *,
    entry: str,
    tick_ms: int,
    next_tick_ms: int,
) -> ClaimOutcome | Enqueued:
    """Claim the due tick ``tick_ms`` of ``entry`` and enqueue ``job`` (``schedule_claim.lua``).

    ``next_tick_ms``: the entry's following tick (``-1``: none, the entry
    leaves the schedule). Returns :attr:`ClaimOutcome.TAKEN`,
    :attr:`ClaimOutcome.PAUSED`, or ``(outcome, job id, state)`` as
    :func:`enqueue` (the job runs at ``tick_ms``).
    """
    call = calls.schedule_claim(keys, job, entry=entry, tick_ms=tick_ms, next_tick_ms=next_tick_ms)
    reply = _run(client, call)
    if len(reply) == 1:
        return ClaimOutcome(as_text(reply[0]))
    return _enqueued(reply)


def schedule_run_now(client: redis.Redis, keys: QueueKeys, job: NewJob, *, entry: str) -> Enqueued:
    """Enqueue ``entry``'s ``job`` now and record it as its latest run
    (``schedule_run_now.lua``)."""
    return _enqueued(_run(client, calls.schedule_run_now(keys, job, entry=entry)))


def pause(client: redis.Redis, keys: QueueKeys) -> bool:
    """Stop the queue from handing out jobs (``pause.lua``); it still accepts them.

    Returns whether it was running (``False``: already paused, the first
    pause's time is kept). Jobs already running finish and report as usual.
    """
    return int(_run(client, calls.pause(keys))) == 1


def resume(client: redis.Redis, keys: QueueKeys) -> bool:
    """Let a paused queue hand out jobs again and wake its idle workers (``resume.lua``).

    Returns whether it was paused (``False``: nothing changed).
    """
    return int(_run(client, calls.resume(keys))) == 1
