"""The engine's transitions by name, one call each on a sync client, for tests.

The package sends each transition as ``run.execute(client,
commands.<transition>(...))`` (:mod:`django_rqueue.engine.run`,
:mod:`django_rqueue.engine.commands`); the tests move jobs around with these
shells, which take the arguments by the names tests use (``retention=``,
``ttl=``) and return the parsed reply.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import redis
import redis.asyncio

from django_rqueue.conf import RateLimit
from django_rqueue.engine import calls, commands, replies
from django_rqueue.engine.calls import (
    CancelMode,
    FailedBatchMode,
    NewJob,
    Retention,
    ScriptCall,
    new_request_id,
)
from django_rqueue.engine.commands import BatchItem
from django_rqueue.engine.keys import QueueKeys
from django_rqueue.engine.replies import (
    ClaimOutcome,
    DueEntries,
    Enqueued,
    EnqueueOutcome,
    EnqueueReply,
    FailReply,
    Reservation,
    Reserved,
)
from django_rqueue.engine.run import (
    ReplicaWait,
    aexecute,
    execute,
    execute_and_wait,
    execute_pipelined,
)
from django_rqueue.exceptions import LeaseLost

__all__ = [
    "BatchItem",
    "ClaimOutcome",
    "DueEntries",
    "EnqueueOutcome",
    "EnqueueReply",
    "Enqueued",
    "FailReply",
    "ReplicaWait",
    "Reservation",
    "Reserved",
    "ack",
    "ack_and_reserve",
    "areserve_many",
    "cancel",
    "cancel_running",
    "empty_queue",
    "enqueue",
    "enqueue_and_wait",
    "enqueue_batch",
    "enqueue_batch_and_wait",
    "fail",
    "failed_batch",
    "pause",
    "promote_due",
    "read_job",
    "reclaim_expired",
    "release",
    "renew_lease",
    "reserve",
    "reserve_many",
    "resume",
    "retry_failed",
    "run_now",
    "schedule_claim",
    "schedule_due",
    "schedule_run_now",
    "schedule_sync",
    "trim_failed",
]


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


async def areserve_many(
    client: redis.asyncio.Redis, keys: QueueKeys, *, request_id: str | None = None, **options: Any
) -> Reserved:
    """:func:`reserve_many` on an asyncio client (``request_id``: default a fresh one;
    ``options``: the other keywords of :func:`~django_rqueue.engine.calls.reserve`)."""
    command = commands.reserve(keys, request_id=request_id or new_request_id(), **options)
    return await aexecute(client, command)


def ack(
    client: redis.Redis, keys: QueueKeys, job_id: str, token: int, result: str, result_ttl: int
) -> None:
    """Record success (``ack.lua``); the record expires after ``result_ttl`` seconds."""
    execute(client, commands.ack(keys, job_id, token, result, result_ttl))


def fail(
    client: redis.Redis,
    keys: QueueKeys,
    job_id: str,
    token: int,
    error: str,
    retry_delay_ms: int,
    *,
    retention: Retention,
) -> FailReply:
    """Record a failed attempt (``fail.lua``).

    ``retry_delay_ms`` ``-1`` forbids a retry. Returns ``(outcome, run-at ms)``
    (:class:`~.replies.FailReply`): ``("retrying", run-at ms)``, ``("failed",
    None)``, or, for a resent report whose first try was applied (its reply
    lost), that outcome with ``None``. A job that goes to the failed store makes
    it apply ``retention`` (the oldest failed jobs beyond it are deleted, at
    most ``retention.limit`` of them).

    Raises:
        LeaseLost: ``token`` is stale (the job was reclaimed, or its record is corrupt).
    """
    return execute(client, commands.fail(keys, job_id, token, error, retry_delay_ms, retention))


def release(client: redis.Redis, keys: QueueKeys, job_id: str, token: int) -> None:
    """Hand a running job back without spending an attempt (``release.lua``)."""
    execute(client, commands.release(keys, job_id, token))


def cancel_running(
    client: redis.Redis, keys: QueueKeys, job_id: str, token: int, *, ttl: int
) -> None:
    """End a running job as cancelled, keeping its record ``ttl`` s (0: delete it)
    (``cancel_running.lua``).

    Raises:
        LeaseLost: ``token`` is stale (the job finished or was reclaimed meanwhile).
    """
    execute(client, commands.cancel_running(keys, job_id, token, ttl))


def promote_due(client: redis.Redis, keys: QueueKeys, limit: int) -> tuple[int, int]:
    """Queue due scheduled jobs (``promote.lua``).

    Returns ``(promoted, ms until the next due job)``; the second is ``-1``
    when nothing is scheduled and ``0`` when more are due right now.
    """
    return execute(client, commands.promote(keys, limit))


def reclaim_expired(
    client: redis.Redis, keys: QueueKeys, limit: int, error: str, *, retention: Retention
) -> tuple[int, int, int]:
    """Take back jobs whose lease expired (``reclaim.lua``).

    Returns ``(requeued, failed, ms until the next lease deadline)`` with the
    same ``-1``/``0`` conventions as :func:`promote_due`. When jobs went to
    the failed store, ``retention`` is applied to it as :func:`fail` does.
    """
    return execute(client, commands.reclaim(keys, limit, error, retention))


def trim_failed(client: redis.Redis, keys: QueueKeys, retention: Retention) -> tuple[int, bool]:
    """Apply ``retention`` to the failed store now (``trim_failed.lua``).

    Deletes the oldest failed jobs (record, error history, ``Job.wait`` list)
    while there are more than ``retention.max_jobs`` or the oldest failed
    ``retention.ttl`` seconds ago or more, at most ``retention.limit`` of
    them. Returns ``(deleted, more)``: ``more`` when the limit was reached
    and another call may delete more.
    """
    return execute(client, commands.trim_failed(keys, retention))


def retry_failed(client: redis.Redis, keys: QueueKeys, job_id: str) -> None:
    """Re-queue a failed job with attempts reset to 0 (``retry.lua``)."""
    execute(client, commands.retry(keys, job_id))


def cancel(client: redis.Redis, keys: QueueKeys, job_id: str, *, mode: CancelMode, ttl: int) -> str:
    """Cancel (keep the record ``ttl`` s) or delete a job that is not running (``cancel.lua``);
    mode ``"cancel"`` on a running job asks its worker to stop it.

    Returns the state the job was in (``"running"``: the stop was requested; the job
    ends ``cancelled`` when its worker has stopped it).

    Raises:
        JobStateError: mode ``"delete"`` of a running job, or a job that finished or is gone.
    """
    return execute(client, commands.cancel(keys, job_id, mode, ttl))


def read_job(client: redis.Redis, keys: QueueKeys, job_id: str) -> dict[bytes, bytes]:
    """Read a job hash (a plain ``HGETALL``; reads need no script)."""
    return execute(client, commands.read_job(keys, job_id))


def run_now(client: redis.Redis, keys: QueueKeys, job_id: str) -> None:
    """Queue a scheduled job at once (``run_now.lua``).

    Raises:
        JobStateError: the job is not scheduled (``.state`` tells what it is).
    """
    execute(client, commands.run_now(keys, job_id))


def schedule_sync(
    client: redis.Redis, keys: QueueKeys, entries: Sequence[tuple[str, str, int]]
) -> tuple[int, int]:
    """Store a queue's periodic entries ``(name, spec, first tick ms)`` (``schedule_sync.lua``).

    Returns ``(entries set or reset, entries removed)``; see the script's header.
    """
    return execute(client, commands.schedule_sync(keys, entries))


def schedule_due(client: redis.Redis, keys: QueueKeys, limit: int) -> DueEntries:
    """Read up to ``limit`` due periodic entries of a queue (``schedule_due.lua``)."""
    return execute(client, commands.schedule_due(keys, limit))


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
    command = commands.schedule_claim(
        keys, job, entry=entry, tick_ms=tick_ms, next_tick_ms=next_tick_ms
    )
    return execute(client, command)


def enqueue(
    client: redis.Redis, call: ScriptCall, meanwhile: Callable[[], object] | None = None
) -> EnqueueReply:
    """Create a job (``enqueue.lua``), given its call (:meth:`.calls.EnqueueShared.call`).

    Returns ``(outcome, job id, state, enqueued_ms)`` (:class:`EnqueueReply`).
    """
    return execute(client, commands.enqueue(call), meanwhile)


def enqueue_and_wait(
    client: redis.Redis, call: ScriptCall, wait: ReplicaWait
) -> tuple[EnqueueReply, int]:
    """:func:`enqueue` given its call (:meth:`.calls.EnqueueShared.call`), then ``WAIT`` on the same
    connection (:class:`ReplicaWait`): ``(enqueued, replicas known to have the job)``."""
    enqueued, acked = execute_and_wait(client, commands.enqueue(call), wait)
    return enqueued, replies.confirmed([enqueued.outcome], acked)


def enqueue_batch(
    client: redis.Redis,
    shared: calls.BatchShared,
    items: Sequence[BatchItem],
    *,
    batch_size: int = 500,
) -> list[Enqueued]:
    """Create many jobs that share their options, ``batch_size`` per ``enqueue_batch.lua`` call
    pipelined two deep (:func:`~django_rqueue.engine.run.execute_pipelined`): the outcomes of
    every batch in one list, in item order. The batches written before an error stay written.
    """
    batches = execute_pipelined(client, commands.enqueue_batches(shared, items, batch_size))
    return [enqueued for batch in batches for enqueued in batch]


def enqueue_batch_and_wait(
    client: redis.Redis, shared: calls.BatchShared, items: Sequence[BatchItem], wait: ReplicaWait
) -> tuple[list[Enqueued], int]:
    """One batch of :func:`enqueue_batch` (all of ``items`` in one call), then ``WAIT`` on the
    same connection (:class:`ReplicaWait`): ``(enqueued, replicas known to have the jobs)``."""
    command = commands.enqueue_batch(shared, items)
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
    """Retry or delete one batch of failed jobs (``failed_batch.lua``):
    ``(done, skipped, stale, scanned)``."""
    command = commands.failed_batch(
        keys, mode=mode, limit=limit, offset=offset, upto_ms=upto_ms, name=name
    )
    return execute(client, command)


def empty_queue(client: redis.Redis, keys: QueueKeys, limit: int) -> tuple[int, int, bool]:
    """Delete up to ``limit`` queued jobs (``empty_queue.lua``): ``(deleted, dropped, more)``."""
    return execute(client, commands.empty_queue(keys, limit))


def schedule_run_now(client: redis.Redis, keys: QueueKeys, job: NewJob, *, entry: str) -> Enqueued:
    """Enqueue ``entry``'s ``job`` now as its latest run (``schedule_run_now.lua``)."""
    return execute(client, commands.schedule_run_now(keys, job, entry=entry))


def pause(client: redis.Redis, keys: QueueKeys) -> bool:
    """Pause the queue (``pause.lua``): whether it was running."""
    return execute(client, commands.pause(keys))


def resume(client: redis.Redis, keys: QueueKeys) -> bool:
    """Resume the queue (``resume.lua``): whether it was paused."""
    return execute(client, commands.resume(keys))
