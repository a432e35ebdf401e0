"""The queue's state transitions as one call each on a client: thin shells over commands and run.

Each function sends one :mod:`~.commands` command with the executors of
:mod:`~.run` (``run.execute(client, commands.<transition>(...))``) and returns
its parsed reply (:mod:`~.replies`); new code calls those directly. The
shells stay for the callers that still name them (the enqueue path, the
reserver, the master's renewals, operations, periodic runs) and the tests.
Times are decided inside the scripts from Redis ``TIME``; durations passed
in are milliseconds. Redis connection problems are raised as
:class:`~.exceptions.RedisUnavailable`; a stale fencing token as
:class:`~.exceptions.LeaseLost`; an action that does not apply to the job's
state as :class:`~.exceptions.JobStateError`. Nothing is written in any of
those cases.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

import redis
import redis.asyncio

from ..conf import RateLimit
from ..exceptions import LeaseLost
from . import calls, commands, replies
from .calls import (
    FailedBatchMode,
    NewJob,
    ScriptCall,
    new_request_id,
)
from .connection import redis_errors
from .keys import QueueKeys
from .replies import (
    ClaimOutcome,
    DueEntries,
    Enqueued,
    EnqueueOutcome,
    EnqueueReply,
    FailReply,
    Reply,
    Reservation,
    Reserved,
)
from .run import (
    ReplicaWait,
    aexecute,
    aexecute_and_wait,
    execute,
    execute_and_wait,
    execute_pipelined,
)

__all__ = [
    "ClaimOutcome",
    "DueEntries",
    "EnqueueOutcome",
    "EnqueueReply",
    "Enqueued",
    "FailReply",
    "ReplicaWait",
    "new_request_id",
    "Reservation",
    "Reserved",
]


def enqueue(
    client: redis.Redis, call: ScriptCall, meanwhile: Callable[[], object] | None = None
) -> EnqueueReply:
    """Create a job (``enqueue.lua``), given its call (:meth:`.calls.EnqueueShared.call`).

    Returns ``(outcome, job id, state, enqueued_ms)`` (:class:`EnqueueReply`).
    """
    return execute(client, commands.enqueue(call), meanwhile)


async def aenqueue(client: redis.asyncio.Redis, call: ScriptCall) -> EnqueueReply:
    """:func:`enqueue` on an asyncio client."""
    return await aexecute(client, commands.enqueue(call))


def enqueue_and_wait(
    client: redis.Redis, call: ScriptCall, wait: ReplicaWait
) -> tuple[EnqueueReply, int]:
    """:func:`enqueue` given its call (:meth:`.calls.EnqueueShared.call`), then ``WAIT`` on the same
    connection (:class:`ReplicaWait`): ``(enqueued, replicas known to have the job)``."""
    enqueued, acked = execute_and_wait(client, commands.enqueue(call), wait)
    return enqueued, replies.confirmed([enqueued.outcome], acked)


async def aenqueue_and_wait(
    client: redis.asyncio.Redis, call: ScriptCall, wait: ReplicaWait
) -> tuple[EnqueueReply, int]:
    """:func:`enqueue_and_wait` on an asyncio client."""
    enqueued, acked = await aexecute_and_wait(client, commands.enqueue(call), wait)
    return enqueued, replies.confirmed([enqueued.outcome], acked)


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

    def batches() -> Iterator[commands.Command[list[Enqueued]]]:
        for start in starts:
            batch = items[start : start + batch_size]
            call = shared.call(
                ((item.job_id, item.payload, item.unique_key) for item in batch),
                with_unique=with_unique,
            )
            yield commands.enqueue_batch(call, [item.job_id for item in batch])

    yield from execute_pipelined(client, batches())


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
    command = commands.enqueue_batch(call, [item.job_id for item in items])
    enqueued, acked = execute_and_wait(client, command, wait)
    return enqueued, replies.confirmed((outcome for outcome, _, _ in enqueued), acked)


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

    Returns the reservations in the order one-by-one reserves would have
    handed them out (priority, then round-robin between groups, then FIFO);
    fewer than ``count``, or none, when the queue runs dry. Each job has its
    own lease deadline (now + ``lease_ms``) and fencing token.
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
    command = commands.reserve(
        keys,
        lease_ms=lease_ms,
        worker_id=worker_id,
        count=count,
        request_id=request_id or new_request_id(),
        group_concurrency=group_concurrency,
        rate_limit=rate_limit,
    )
    return execute(client, command)


def reserve_command(call: ScriptCall) -> list[str | int | float]:
    """A reserve call (:func:`.calls.reserve`, with its ``request_id``) as a bare ``EVALSHA``
    command (``[name, *arguments]``), to send behind another command in one write (the idle
    ``BLPOP``: :mod:`~..worker.idle`).

    Its reply is read with :func:`reserved_from`. Redis answers ``NOSCRIPT`` when it
    lost the script: send the call again with :func:`reserve_call` (the same request id),
    which loads the script (and returns the jobs, if the first send ran after all).
    """
    return commands.evalsha(call)


def reserve_call(client: redis.Redis, call: ScriptCall) -> Reserved:
    """:func:`reserve_many` given its call (:func:`.calls.reserve`): sent again with the same
    request id, it returns the jobs the first send reserved instead of reserving more."""
    return execute(client, commands.Command(call, replies.reserved))


def reserved_from(reply: Reply | redis.ResponseError) -> Reserved:
    """Read the reply of a :func:`reserve_command` (``{wait, reservation, ...}``).

    Raises:
        redis.ResponseError: the reply is an error (``NOSCRIPT``, bad arguments).
    """
    if isinstance(reply, redis.ResponseError):
        raise reply
    return replies.reserved(reply)


async def areserve_call(client: redis.asyncio.Redis, call: ScriptCall) -> Reserved:
    """:func:`reserve_call` on an asyncio client: sent again with the same request id, it
    returns the jobs the first send reserved instead of reserving more."""
    return await aexecute(client, commands.Command(call, replies.reserved))


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
    """An ack, then :func:`reserve_many` on the same queue, in one call (``ack_reserve.lua``).

    The ack gives its job's group slot back before the reservations are made
    (``group_concurrency``, ``rate_limit``: as :func:`reserve_many`).

    Returns ``(stale, reserved)``: ``stale`` is ``None`` when the ack was
    applied, else the :class:`LeaseLost` that an ack would have raised
    (returned, not raised, so that the reservations made in the same call are
    never dropped); ``reserved`` as :func:`reserve_many` (up to ``count``;
    idempotent per ``request_id`` the same way). After :class:`RedisUnavailable`
    send a plain ack (:func:`.commands.ack`): a new call would reserve more jobs.
    """
    command = commands.ack_reserve(
        keys,
        job_id,
        token,
        result,
        result_ttl,
        lease_ms=lease_ms,
        worker_id=worker_id,
        count=count,
        request_id=request_id or new_request_id(),
        group_concurrency=group_concurrency,
        rate_limit=rate_limit,
    )
    return execute(client, command)


def renew_lease(
    client: redis.Redis, keys: QueueKeys, job_id: str, token: int, lease_ms: int
) -> int:
    """Extend a running job's lease (``renew.lua``); return the new deadline in ms."""
    return execute(client, commands.renew(keys, job_id, token, lease_ms))


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
    command = commands.failed_batch(
        keys, mode=mode, limit=limit, offset=offset, upto_ms=upto_ms, name=name
    )
    return execute(client, command)


def empty_queue(client: redis.Redis, keys: QueueKeys, limit: int) -> tuple[int, int, bool]:
    """Delete up to ``limit`` queued jobs of the queue, in serving order (``empty_queue.lua``).

    Returns ``(deleted, dropped, more)``: jobs deleted, stale ids dropped from the
    lists, and whether queued jobs are left (call again).
    """
    return execute(client, commands.empty_queue(keys, limit))


def schedule_run_now(client: redis.Redis, keys: QueueKeys, job: NewJob, *, entry: str) -> Enqueued:
    """Enqueue ``entry``'s ``job`` now and record it as its latest run
    (``schedule_run_now.lua``)."""
    return execute(client, commands.schedule_run_now(keys, job, entry=entry))


def pause(client: redis.Redis, keys: QueueKeys) -> bool:
    """Stop the queue from handing out jobs (``pause.lua``); it still accepts them.

    Returns whether it was running (``False``: already paused, the first
    pause's time is kept). Jobs already running finish and report as usual.
    """
    return execute(client, commands.pause(keys))


def resume(client: redis.Redis, keys: QueueKeys) -> bool:
    """Let a paused queue hand out jobs again and wake its idle workers (``resume.lua``).

    Returns whether it was paused (``False``: nothing changed).
    """
    return execute(client, commands.resume(keys))
