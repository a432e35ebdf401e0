"""The queue's transitions as values: each a script call paired with the parser of its reply (pure).

A :class:`Command` is what a transition sends (a :class:`~.calls.ScriptCall`,
built by :mod:`~django_rqueue.engine.calls`) and how its reply is read (a
parser of :mod:`~django_rqueue.engine.replies`). Nothing here does I/O: the
executors of :mod:`~django_rqueue.engine.run` send a command, on a sync or an
asyncio client, and the generators of :mod:`~django_rqueue.engine.flows` yield
them. :class:`Plain` is the same for the few plain Redis commands a flow sends
(``HGETALL``, ``BLPOP``, the wake-up push).

Each command takes its builder's arguments (the builder's signature is not
written again here) and returns ``Command[<what the parser returns>]``; what
a parser raises (``LeaseLost``, ``JobStateError``) is raised by the executor.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Concatenate, NamedTuple

from . import calls, replies
from .calls import Arg, BatchShared, CancelMode, ScriptCall
from .keys import QueueKeys
from .replies import Enqueued, EnqueueReply, Fields, Reply, Reserved
from .scripts import load


class Command[T](NamedTuple):
    """One script call and the parser of its reply (a named tuple: made on every ``.delay()``)."""

    call: ScriptCall
    parse: Callable[[Reply], T]


class Plain[T](NamedTuple):
    """Plain Redis commands (no script), sent in one round trip, and the parser of their replies.

    One command is sent as it is (its reply as redis-py's response callback
    makes it: ``HGETALL`` a dict, ``BLPOP`` a pair or ``None``); several go in one
    pipeline, a ``MULTI`` when ``transaction``, and the parser gets the list of replies.
    """

    commands: tuple[tuple[Arg, ...], ...]
    parse: Callable[[Any], T]
    transaction: bool = False


#: What an executor runs and a flow yields.
type Step[T] = Command[T] | Plain[T]


def _command[**P, T](
    build: Callable[P, ScriptCall], parse: Callable[[Reply], T]
) -> Callable[P, Command[T]]:
    """The command of each call ``build`` makes, read with ``parse``."""

    def command(*args: P.args, **kwargs: P.kwargs) -> Command[T]:
        return Command(build(*args, **kwargs), parse)

    command.__doc__ = build.__doc__
    return command


def _leased[**P, T](
    build: Callable[Concatenate[QueueKeys, str, int, P], ScriptCall],
    parse: Callable[[Reply, str, int], T],
) -> Callable[Concatenate[QueueKeys, str, int, P], Command[T]]:
    """:func:`_command` for a report under a lease (``keys, job_id, token, ...``): ``parse``
    also gets the job id and the fencing token (to tell a stale token from a resent report)."""

    def command(
        keys: QueueKeys, job_id: str, token: int, /, *args: P.args, **kwargs: P.kwargs
    ) -> Command[T]:
        return Command(
            build(keys, job_id, token, *args, **kwargs), lambda reply: parse(reply, job_id, token)
        )

    command.__doc__ = build.__doc__
    return command


def _stale[T](parse: Callable[[Reply, str], T]) -> Callable[[Reply, str, int], T]:
    """A parser that needs the job id only (a stale reply names the current token itself)."""
    return lambda reply, job_id, _token: parse(reply, job_id)


# -- enqueueing ---------------------------------------------------------------


def enqueue(call: ScriptCall) -> Command[EnqueueReply]:
    """Create a job (``enqueue.lua``), given its call (:meth:`.calls.EnqueueShared.call`):
    ``(outcome, job id, state, enqueued_ms)`` (:class:`~.replies.EnqueueReply`)."""
    return Command(call, replies.enqueue_reply)


class BatchItem(NamedTuple):
    """One job of :func:`enqueue_batch`: what differs between the jobs of a batch."""

    job_id: str
    unique_key: str
    payload: str


def enqueue_batch(
    shared: BatchShared, items: Sequence[BatchItem], *, with_unique: bool | None = None
) -> Command[list[Enqueued]]:
    """Create the jobs ``items`` in one call (``enqueue_batch.lua``,
    :meth:`.calls.BatchShared.call`): one :data:`~.replies.Enqueued` per item, in order.

    ``with_unique``: whether the items carry unique keys (default: whether one does).
    """
    if with_unique is None:
        with_unique = any(item.unique_key for item in items)
    call = shared.call(
        ((item.job_id, item.payload, item.unique_key) for item in items), with_unique=with_unique
    )
    job_ids = [item.job_id for item in items]
    return Command(call, lambda reply: replies.batch_enqueued(job_ids, reply))


def enqueue_batches(
    shared: BatchShared, items: Sequence[BatchItem], batch_size: int = 500
) -> Iterator[Command[list[Enqueued]]]:
    """:func:`enqueue_batch` for ``items`` in batches of ``batch_size``, in order, built as
    they are asked for (:func:`.run.execute_pipelined` encodes one while Redis writes the one
    before); every batch sends unique keys when one item of ``items`` has one."""
    with_unique = any(item.unique_key for item in items)
    for start in range(0, len(items), batch_size):
        yield enqueue_batch(shared, items[start : start + batch_size], with_unique=with_unique)


def existing_jobs(keys: QueueKeys, job_ids: Sequence[str]) -> Plain[list[bool]]:
    """Whether the record of each of ``job_ids`` exists (one pipelined ``EXISTS`` each)."""
    return Plain(tuple(("EXISTS", keys.job(job_id)) for job_id in job_ids), _found)


def _found(replies: list[int]) -> list[bool]:
    return [bool(found) for found in replies]


#: Enqueue a periodic entry's job now and record it as its latest run
#: (``schedule_run_now.lua``): ``(outcome, job id, state)`` as :func:`enqueue`.
schedule_run_now = _command(calls.schedule_run_now, replies.enqueued)
#: Claim a due tick of an entry and enqueue its job (``schedule_claim.lua``):
#: :attr:`~.replies.ClaimOutcome.TAKEN`, :attr:`~.replies.ClaimOutcome.PAUSED`, or
#: ``(outcome, job id, state)``.
schedule_claim = _command(calls.schedule_claim, replies.claimed)
#: Store a queue's periodic entries (``schedule_sync.lua``): ``(set or reset, removed)``.
schedule_sync = _command(calls.schedule_sync, replies.pair)
#: Read the due periodic entries of a queue (``schedule_due.lua``).
schedule_due = _command(calls.schedule_due, replies.due_entries)

# -- reserving and reporting --------------------------------------------------

#: Reserve up to ``count`` jobs, idempotent per ``request_id`` (``reserve.lua``).
reserve = _command(calls.reserve, replies.reserved)


def reserving(call: ScriptCall) -> Command[Reserved]:
    """A reserve call already built (:func:`.calls.reserve`): sent again with the same
    request id, it returns the jobs the first send reserved instead of reserving more."""
    return Command(call, replies.reserved)


#: Ack one job and reserve more in one call (``ack_reserve.lua``): ``(stale, reserved)``
#: (:func:`~.replies.ack_reserved`: the stale token returned, not raised).
ack_reserve = _leased(calls.ack_reserve, replies.ack_reserved)
#: Record a success (``ack.lua``); ``LeaseLost`` for a stale token.
ack = _leased(calls.ack, replies.acked)
#: Record a failed attempt (``fail.lua``): :class:`~.replies.FailReply`.
fail = _leased(calls.fail, replies.failed)
#: Extend a running job's lease (``renew.lua``): the new deadline, ms.
renew = _leased(calls.renew, _stale(replies.renewed))
#: Hand a running job back without spending an attempt (``release.lua``).
release = _leased(calls.release, _stale(replies.ok))
#: End a running job as cancelled (``cancel_running.lua``).
cancel_running = _leased(calls.cancel_running, _stale(replies.ok))

# -- the poller ---------------------------------------------------------------

#: Queue due scheduled jobs (``promote.lua``): ``(promoted, ms until the next due job)``.
promote = _command(calls.promote, replies.pair)
#: The same call, read whole (``promote.lua``): :class:`~.replies.Promoted`, which also says
#: whether the queue's outbox has entries and when its next dependency deadline falls.
promote_round = _command(calls.promote, replies.promoted)
#: Take back jobs whose lease expired (``reclaim.lua``): ``(requeued, failed, ms)``.
reclaim = _command(calls.reclaim, replies.reclaimed)
#: Apply a retention to the failed store now (``trim_failed.lua``): ``(deleted, more)``.
trim_failed = _command(calls.trim_failed, replies.trimmed)

# -- the staff side -----------------------------------------------------------


def retry(keys: QueueKeys, job_id: str) -> Command[None]:
    """Re-queue a failed job (``retry.lua``); ``JobStateError`` when it is not failed."""
    refusal = "job {job_id} is {state}, not failed"
    return Command(calls.retry(keys, job_id), lambda r: replies.requeued(r, job_id, refusal))


def run_now(keys: QueueKeys, job_id: str) -> Command[None]:
    """Queue a scheduled job at once (``run_now.lua``); ``JobStateError`` when it is not
    scheduled."""
    refusal = "job {job_id} is {state}, not scheduled"
    return Command(calls.run_now(keys, job_id), lambda r: replies.requeued(r, job_id, refusal))


def cancel(keys: QueueKeys, job_id: str, mode: CancelMode, ttl: int) -> Command[str]:
    """Cancel or delete a job that is not running, or ask a running one to stop
    (``cancel.lua``): the state the job was in (:func:`~.replies.cancelled`)."""
    return Command(
        calls.cancel(keys, job_id, mode, ttl), lambda r: replies.cancelled(r, job_id, mode)
    )


#: Retry or delete one batch of failed jobs (``failed_batch.lua``).
failed_batch = _command(calls.failed_batch, replies.failed_batch)
#: Delete queued jobs in serving order (``empty_queue.lua``): ``(deleted, dropped, more)``.
empty_queue = _command(calls.empty_queue, replies.emptied)
#: Stop the queue from handing out jobs (``pause.lua``): whether it was running.
pause = _command(calls.pause, replies.flag)
#: Let a paused queue hand out jobs again (``resume.lua``): whether it was paused.
resume = _command(calls.resume, replies.flag)

# -- reading and waiting ------------------------------------------------------


def mark_awaited(keys: QueueKeys, job_id: str) -> Command[Fields]:
    """Mark a job as awaited and read it (``mark_awaited.lua``): its hash, ``{}`` when gone."""
    return Command(calls.mark_awaited(keys, job_id), replies.fields)


def _hash(reply: Any) -> Fields:
    return reply  # type: ignore[no-any-return]  # HGETALL's response callback made the dict


def read_job(keys: QueueKeys, job_id: str) -> Plain[Fields]:
    """Read a job hash (a plain ``HGETALL``: reads need no script); ``{}`` when it is gone."""
    return Plain((("HGETALL", keys.job(job_id)),), _hash)


def read_hash(key: str) -> Plain[Fields]:
    """Read any hash of the queue's (a plain ``HGETALL``); ``{}`` when it is gone."""
    return Plain((("HGETALL", key),), _hash)


def block_done(keys: QueueKeys, job_id: str, timeout: float) -> Plain[bool]:
    """``BLPOP`` the job's wake-up list for ``timeout`` seconds (> 0, well under the socket
    timeout): whether a token came."""
    return Plain((("BLPOP", keys.done(job_id), timeout),), _popped)


def _popped(reply: Any) -> bool:
    return reply is not None


#: Seconds the wake-up list lives after a push (as ``include/wake_waiters.lua``).
DONE_TTL = 60


def pass_on(keys: QueueKeys, job_id: str) -> Plain[None]:
    """Push the token back on the job's wake-up list for its other waiters (``MULTI``:
    ``RPUSH``, then ``EXPIRE`` after :data:`DONE_TTL` s)."""
    done = keys.done(job_id)
    return Plain((("RPUSH", done, 1), ("EXPIRE", done, DONE_TTL)), _nothing, transaction=True)


def _nothing(reply: Any) -> None:
    return None


def evalsha(call: ScriptCall) -> list[Arg]:
    """``call`` as a bare ``EVALSHA`` command (``[name, *arguments]``), to send behind another
    command in one write (the idle ``BLPOP``: :mod:`django_rqueue.worker.idle`)."""
    return ["EVALSHA", load(call.script).sha, len(call.keys), *call.keys, *call.args]
