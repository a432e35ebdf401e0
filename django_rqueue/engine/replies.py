"""The replies of the Lua scripts: one typed result and one pure parser per script (no I/O).

The twin of :mod:`~django_rqueue.engine.calls`, which builds the requests: each
parser here reads the raw reply redis-py returns for a script call
(:data:`Reply`) and returns a typed value, or raises what the reply means
(:class:`~django_rqueue.exceptions.LeaseLost` for a stale fencing token,
:class:`~django_rqueue.exceptions.JobStateError` for a refusal). The header of
each ``.lua`` file documents its reply; :mod:`~django_rqueue.engine.commands`
pairs every call with its parser.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from typing import NamedTuple, cast

import redis

from ..exceptions import JobStateError, LeaseLost

#: A Lua script's reply as redis-py returns it raw (RESP2): an integer, a bulk string
#: (``bytes``; ``str`` on a client with ``decode_responses``), an array of replies, or nil.
Reply = int | bytes | str | list["Reply"] | None

#: A job hash as ``HGETALL`` returns it (field -> value).
Fields = dict[bytes, bytes]


def items(reply: Reply) -> list[Reply]:
    """``reply`` as an array (``TypeError``: it is not one)."""
    if not isinstance(reply, list):
        raise TypeError(f"a script replied {reply!r} where an array was expected")
    return reply


def text(value: Reply) -> str:
    """A bulk string of a reply as ``str`` (UTF-8, undecodable bytes replaced); ``""`` for nil.

    Raises:
        TypeError: ``value`` is an array.
    """
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, int):
        return str(value)
    raise TypeError(f"a script replied {value!r} where a string was expected")


def number(value: Reply) -> int:
    """An integer of a reply (Lua numbers arrive as integers, some as decimal strings).

    Raises:
        TypeError: ``value`` is nil or an array.
        ValueError: ``value`` is a string that is not a number.
    """
    if isinstance(value, int):
        return value
    if isinstance(value, bytes | str):
        return int(value)
    raise TypeError(f"a script replied {value!r} where an integer was expected")


def fields(reply: Reply) -> Fields:
    """A flat ``field, value, ...`` array as a job hash (``{}`` for an empty one)."""
    it = iter(items(reply))
    return cast(Fields, dict(zip(it, it, strict=True)))


# -- refusals -----------------------------------------------------------------

#: The state a script reports for a job whose record in Redis is not a hash (a foreign
#: write put a string, list ... there) or has no state: ``scripts/include/record_problem.lua``.
CORRUPT_STATE = "corrupt"


def stale_lease(job_id: str, reply: Reply) -> LeaseLost:
    """The :class:`LeaseLost` for a ``{'stale', state, current token}`` script reply."""
    got = items(reply)
    state, token = text(got[1]) or "missing", text(got[2])
    if state == CORRUPT_STATE:  # then the third item says what is wrong with the record
        return LeaseLost(
            f"job {job_id}: its record in Redis is corrupt ({token}); the job goes to the "
            "failed store when its lease expires"
        )
    return LeaseLost(f"job {job_id}: stale fencing token (job is {state}, token {token})")


def applied(ack_reply: Reply, token: int) -> bool:
    """Whether an ``ack.lua`` reply says the job is acked under ``token``.

    ``{'stale', 'succeeded', <our token>}`` means an earlier try of this very
    ack (redis-py retries after a timeout) was applied and only its reply was
    lost: acks are idempotent.
    """
    got = items(ack_reply)
    if text(got[0]) == "ok":
        return True
    return text(got[1]) == "succeeded" and text(got[2]) == str(token)


def refused(reply: Reply, job_id: str, message: str) -> JobStateError:
    """The :class:`JobStateError` of a refusal ``{status, state}``.

    ``message`` is formatted with ``job_id`` and ``state`` (``"missing"`` when
    the job is gone; ``.state`` is then ``None``).
    """
    state = text(items(reply)[1]) or None
    return JobStateError(message.format(job_id=job_id, state=state or "missing"), state)


def acked(reply: Reply, job_id: str, token: int) -> None:
    """``ack.lua``: nothing, or ``LeaseLost`` (stale token; a resent ack reads as applied)."""
    if not applied(reply, token):
        raise stale_lease(job_id, reply)


def ok(reply: Reply, job_id: str) -> None:
    """``{'ok'}`` of ``release.lua``/``cancel_running.lua``; ``LeaseLost`` for a stale token."""
    if text(items(reply)[0]) != "ok":
        raise stale_lease(job_id, reply)


def renewed(reply: Reply, job_id: str) -> int:
    """``renew.lua``: the new lease deadline (ms, Redis clock); ``LeaseLost`` for a stale token."""
    got = items(reply)
    if text(got[0]) != "ok":
        raise stale_lease(job_id, reply)
    return number(got[1])


# -- enqueueing ---------------------------------------------------------------


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


#: The script's outcome as redis-py returns it (bytes, or str with ``decode_responses``).
_OUTCOMES: dict[bytes | str, EnqueueOutcome] = {
    **{outcome.value: outcome for outcome in EnqueueOutcome},
    **{outcome.value.encode(): outcome for outcome in EnqueueOutcome},
}


def enqueued(reply: Reply) -> Enqueued:
    """``{outcome, job id, state, ...}`` (``enqueue.lua``, ``schedule_*.lua``) as :data:`Enqueued`.

    Raises:
        ValueError: an outcome this version does not know.
    """
    got = items(reply)
    head = got[0]
    outcome = _OUTCOMES.get(head) if isinstance(head, bytes | str) else None
    if outcome is None:
        raise ValueError(f"enqueue: unknown outcome {head!r}")
    return outcome, text(got[1]), text(got[2])


def enqueue_reply(reply: Reply) -> EnqueueReply:
    """``enqueue.lua``'s reply: :func:`enqueued`, and the enqueue time of a created job."""
    got = items(reply)
    outcome, job_id, state = enqueued(got)
    return EnqueueReply(outcome, job_id, state, number(got[3]) if len(got) > 3 else None)


def batch_enqueued(job_ids: Sequence[str], reply: Reply) -> list[Enqueued]:
    """One ``enqueue_batch.lua`` reply as an :data:`Enqueued` per job of its batch
    (``job_ids``: the batch's, in order).

    The reply is the state of created jobs, then ``index, outcome, id, state``
    for every item that was not simply created.
    """
    got = items(reply)
    state = text(got[0])
    batch = [(EnqueueOutcome.CREATED, job_id, state) for job_id in job_ids]
    for i in range(1, len(got), 4):
        batch[number(got[i]) - 1] = (
            EnqueueOutcome(text(got[i + 1])),
            text(got[i + 2]),
            text(got[i + 3]),
        )
    return batch


def confirmed(outcomes: Iterable[EnqueueOutcome], acked: int) -> int:
    """The replicas known to have the jobs: ``WAIT``'s count, or 0 after a resent write.

    ``exists`` means an earlier send of this same call (its connection lost
    before the reply) wrote the job; the ``WAIT`` of the new connection says
    nothing about that write, so its replication is unknown.
    """
    return 0 if EnqueueOutcome.EXISTS in outcomes else acked


# -- reserving and reporting --------------------------------------------------

#: A reservation: ``(job id, job hash as HGETALL returns it)``.
Reservation = tuple[str, Fields]


class Reserved(NamedTuple):
    """What one reserving call handed out."""

    #: The reservations, in the order one-by-one reserves would have handed them out.
    jobs: list[Reservation]
    #: 0, or, when the queue's rate limit handed out fewer jobs than asked while more
    #: are queued, the milliseconds (Redis clock) until it lets the next one go: asking
    #: again sooner gets nothing.
    wait_ms: int = 0


def _reservation(reply: Reply) -> Reservation:
    got = items(reply)
    return text(got[0]), fields(got[1:])


def reserved(reply: Reply) -> Reserved:
    """Read ``{wait, reservation, ...}`` (``reserve.lua``, the tail of ``ack_reserve.lua``)."""
    got = items(reply)
    return Reserved([_reservation(item) for item in got[1:]], number(got[0]))


def reserved_from(reply: Reply | redis.ResponseError) -> Reserved:
    """:func:`reserved` of a reply read raw behind another command (the idle ``BLPOP``'s
    pickup), which may be the error Redis answered.

    Raises:
        redis.ResponseError: the reply is an error (``NOSCRIPT``, bad arguments).
    """
    if isinstance(reply, redis.ResponseError):
        raise reply
    return reserved(reply)


def ack_reserved(reply: Reply, job_id: str, token: int) -> tuple[LeaseLost | None, Reserved]:
    """``ack_reserve.lua``: ``(stale, reserved)``; ``stale`` is ``None`` when the ack was
    applied, else the :class:`LeaseLost` an ack would have raised (returned, not raised,
    so that the reservations made in the same call are never dropped)."""
    ack, *rest = items(reply)
    stale = None if applied(ack, token) else stale_lease(job_id, ack)
    return stale, reserved(rest)


class FailOutcome(enum.StrEnum):
    """Where ``fail.lua`` put a job after a failed attempt."""

    #: Scheduled for another attempt.
    RETRYING = "retrying"
    #: In the failed store (no attempt left, or no retry allowed).
    FAILED = "failed"


class FailReply(NamedTuple):
    """What ``fail.lua`` answered."""

    outcome: FailOutcome
    #: When the retry runs (ms since the epoch, Redis clock) for :attr:`FailOutcome.RETRYING`;
    #: ``None`` for :attr:`FailOutcome.FAILED`, and for a resent report whose first try was
    #: applied (its reply lost: the run-at time is not known then).
    run_at_ms: int | None


def failed(reply: Reply, job_id: str, token: int) -> FailReply:
    """``fail.lua``'s reply: :class:`FailReply`, or ``LeaseLost`` for a stale token.

    A ``stale`` reply naming our own token with the job already scheduled or
    failed is an earlier try of this very report, applied with its reply lost
    (``fail.lua`` is idempotent): read as that outcome, without its run-at time.
    """
    got = items(reply)
    outcome = text(got[0])
    if outcome == "stale":
        state, current = text(got[1]), text(got[2])
        if current == str(token) and state == "scheduled":
            return FailReply(FailOutcome.RETRYING, None)
        if current == str(token) and state == "failed":
            return FailReply(FailOutcome.FAILED, None)
        raise stale_lease(job_id, reply)
    if outcome == FailOutcome.RETRYING:
        return FailReply(FailOutcome.RETRYING, number(got[1]))
    return FailReply(FailOutcome(outcome), None)


# -- the poller and the staff side --------------------------------------------


def pair(reply: Reply) -> tuple[int, int]:
    """A two-integer reply: ``promote.lua`` (promoted, ms until the next due job),
    ``schedule_sync.lua`` (entries set, entries removed)."""
    got = items(reply)
    return number(got[0]), number(got[1])


class Promoted(NamedTuple):
    """``promote.lua``'s whole reply: what the poller's round needs from the queue."""

    #: Scheduled jobs queued by this call.
    promoted: int
    #: Ms until the next due scheduled job; -1: none; 0: the batch was full, more are due.
    next_due_ms: int
    #: Entries in the queue's outbox (outcomes for dependents on other queues): the relay
    #: has work when it is above 0.
    outbox: int
    #: Ms until the earliest dependency deadline of a waiting job (0: one has passed, the
    #: sweep has work); -1: no job waits, or none has a deadline.
    next_deadline_ms: int


def promoted(reply: Reply) -> Promoted:
    """``promote.lua``: :class:`Promoted` (:func:`pair` reads its first two items only)."""
    got = items(reply)
    return Promoted(number(got[0]), number(got[1]), number(got[2]), number(got[3]))


def reclaimed(reply: Reply) -> tuple[int, int, int]:
    """``reclaim.lua``: ``(requeued, failed, ms until the next lease deadline)``."""
    got = items(reply)
    return number(got[0]), number(got[1]), number(got[2])


def trimmed(reply: Reply) -> tuple[int, bool]:
    """``trim_failed.lua``: ``(deleted, more)``."""
    got = items(reply)
    return number(got[0]), number(got[1]) == 1


def emptied(reply: Reply) -> tuple[int, int, bool]:
    """``empty_queue.lua``: ``(deleted, dropped, more)``."""
    got = items(reply)
    return number(got[0]), number(got[1]), number(got[2]) == 1


def failed_batch(reply: Reply) -> tuple[int, int, int, int]:
    """``failed_batch.lua``: ``(done, skipped, stale, scanned)``."""
    got = items(reply)
    return number(got[0]), number(got[1]), number(got[2]), number(got[3])


def flag(reply: Reply) -> bool:
    """An integer reply read as a yes/no (``pause.lua``, ``resume.lua``: whether it changed)."""
    return number(reply) == 1


def requeued(reply: Reply, job_id: str, refusal: str) -> None:
    """``{'ok'}`` of ``retry.lua``/``run_now.lua``, else the :func:`refused` ``refusal``;
    ``retry.lua``'s ``{'member', workflow id}`` (a failed node of a workflow) raises a
    :class:`JobStateError` (state ``"failed"``) that names the workflow."""
    got = items(reply)
    status = text(got[0])
    if status == "member":
        workflow = text(got[1])
        raise JobStateError(
            f"job {job_id} is a node of workflow {workflow}: it is retried with the "
            "workflow's retry_failed(), which also re-arms the nodes its failure cancelled",
            "failed",
        )
    if status != "ok":
        raise refused(reply, job_id, refusal)


def cancelled(reply: Reply, job_id: str, mode: str) -> str:
    """``cancel.lua``: the state the job was in (``"running"``: its stop was requested).

    Raises:
        JobStateError: the script refused (the job finished, is running for a delete, or is gone).
    """
    got = items(reply)
    status = text(got[0])
    if status == "requested":
        return text(got[1])
    if status != "ok":
        raise refused(reply, job_id, f"cannot {mode} job {{job_id}}: it is {{state}}")
    return text(got[1])


class ClaimOutcome(enum.StrEnum):
    """What ``schedule_claim.lua`` did with one due tick, besides :class:`EnqueueOutcome`."""

    #: Another poller claimed this tick first (or the entry is gone): nothing written.
    TAKEN = "taken"
    #: The entry is paused: the tick was passed over and nothing enqueued.
    PAUSED = "paused"


def claimed(reply: Reply) -> ClaimOutcome | Enqueued:
    """``schedule_claim.lua``: a :class:`ClaimOutcome`, or :func:`enqueued`'s triple."""
    got = items(reply)
    if len(got) == 1:
        return ClaimOutcome(text(got[0]))
    return enqueued(got)


class DueEntries(NamedTuple):
    """What ``schedule_due.lua`` read."""

    #: Redis time, ms since the epoch.
    now_ms: int
    #: ``(entry, tick ms)`` of the due entries, earliest tick first.
    due: list[tuple[str, int]]
    #: The tick (ms) of the first entry not due yet; ``-1``: none; ``0``: more may be due.
    next_ms: int


def due_entries(reply: Reply) -> DueEntries:
    """``schedule_due.lua``: ``{now, next tick, entry, tick, ...}`` (ticks as Lua numbers,
    which may arrive as decimal strings)."""
    got = items(reply)
    it = iter(got[2:])
    due = [(text(entry), int(float(text(tick)))) for entry, tick in zip(it, it, strict=True)]
    return DueEntries(number(got[0]), due, int(float(text(got[1]))))
