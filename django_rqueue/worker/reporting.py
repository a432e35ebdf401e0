"""Reporting an attempt's outcome to Redis: one path for the worker loop and the master.

A child reports the jobs it ran (:func:`deliver_ack`, :func:`deliver_failure`)
and hands back the ones it reserved ahead and never started
(:func:`hand_back`); the master reports on a dead child's behalf
(:func:`fail_lost_attempt`, :func:`hand_back`). Either way the attempt ends
with :func:`conclude`: the outcome signal (``job_succeeded``,
``job_retrying`` or ``job_failed``; none for a job stopped by its cancel,
:func:`deliver_cancel`) and one log line per job on the
``django_rqueue.worker`` logger::

    <name> <id> queue=<queue> attempt=<n>/<max> outcome=<outcome> duration_ms=<ms>

(``reason=<why>`` instead of ``duration_ms`` and ``error`` for an attempt the master failed;
``retry_in=<s>s`` after it for an attempt that will be retried: the backoff's delay).
A success is logged at INFO; a failed attempt that will be retried at WARNING
with ``error='<type>: <message>'``; a final failure at ERROR with the same
and the exception's traceback (so log alerting and Sentry's logging
integration see it; when the message or traceback quoted a sensitive argument,
``@job(sensitive=...)``, the traceback is the text with it hidden, in the message);
a :class:`~.exceptions.WorkerLost` or :class:`~.exceptions.UnknownJob` attempt at
ERROR, whatever comes next, with what to do about it.
Every report is fenced by the job's token: one whose lease was lost changes
nothing and reads as :attr:`AttemptOutcome.DISCARDED`.

:class:`~.hooks.AttemptOutcome` lives with the child-master contract (:mod:`~.hooks`) and
is re-exported here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import redis

from .. import registry
from ..display import printable
from ..encryption import seal
from ..engine import commands, run
from ..engine.calls import Retention
from ..engine.connection import get_client
from ..engine.keys import QueueKeys
from ..engine.pipelining import AckStream, PendingAck
from ..engine.queue_ref import QueueRef, queue_ref
from ..exceptions import JobCancelled, LeaseLost, RedisUnavailable, UnknownJob, WorkerLost
from ..execution import AttemptResult, aannounce, announce, failure, next_delay
from ..job import Job
from .hooks import AttemptOutcome
from .reconnect import Reconnect

if TYPE_CHECKING:
    from ..types import JobSpec

logger = logging.getLogger("django_rqueue.worker")

#: Longest pause in seconds between attempts to deliver an ack/fail while Redis is unreachable.
REPORT_RETRY = 0.5
#: Seconds a worker keeps trying to deliver an ack/fail before giving up (the
#: lease then expires and the poller re-delivers the job).
REPORT_PATIENCE = 60.0


def retry_while_unreachable(job_id: str, report: Callable[[], AttemptOutcome]) -> AttemptOutcome:
    """Run ``report`` (an ack or fail), retrying for :data:`REPORT_PATIENCE` seconds while
    Redis is unreachable (:class:`~.reconnect.Reconnect` delays, at most :data:`REPORT_RETRY`).

    Returns ``report``'s outcome, or :attr:`~AttemptOutcome.DISCARDED` for a
    stale token or when patience runs out (the lease then expires and the
    poller re-delivers the job).
    """
    deadline = time.monotonic() + REPORT_PATIENCE
    reconnect = Reconnect(cap=REPORT_RETRY)
    while True:
        try:
            return report()
        except LeaseLost as exc:
            logger.error("%s; discarding this run", exc)
            return AttemptOutcome.DISCARDED
        except RedisUnavailable as exc:
            if time.monotonic() > deadline:
                logger.error("giving up reporting %s: %s (lease will expire)", job_id, exc)
                return AttemptOutcome.DISCARDED
            time.sleep(reconnect.next_delay())


def deliver_ack(ack: PendingAck) -> AttemptOutcome:
    """Ack synchronously, retrying while Redis is unreachable (``succeeded``/``discarded``)."""

    def deliver() -> AttemptOutcome:
        client = get_client(ack.queue)
        run.execute(
            client, commands.ack(ack.keys, ack.job_id, ack.token, ack.result, ack.result_ttl)
        )
        return AttemptOutcome.SUCCEEDED

    return retry_while_unreachable(ack.job_id, deliver)


def deliver_failure(
    queue: str, job: Job[Any], outcome: AttemptResult, delay: float | None
) -> AttemptOutcome:
    """Record a failed attempt, retrying while Redis is unreachable.

    ``delay``: seconds until the retry, ``None`` for none. Returns
    ``retrying``, ``failed`` or ``discarded``.
    """
    ref = queue_ref(queue)
    keys, retention = ref.keys, Retention.of(ref.config)
    delay_ms = -1 if delay is None else int(delay * 1000)

    def deliver() -> AttemptOutcome:
        client = ref.client()
        error = seal(outcome.error_json(job.worker))
        fail = commands.fail(keys, job.id, job.token, error, delay_ms, retention)
        return AttemptOutcome(run.execute(client, fail).outcome)

    return retry_while_unreachable(job.id, deliver)


def deliver_outcome(
    queue: str, job: Job[Any], outcome: AttemptResult, delay: float | None
) -> AttemptOutcome:
    """:func:`deliver_ack` a success or :func:`deliver_failure` a failure of ``job``'s attempt."""
    if outcome.ok:
        keys = queue_ref(queue).keys
        result = seal(outcome.result_json or "null")
        return deliver_ack(PendingAck(queue, keys, job.id, job.token, result, job.result_ttl))
    return deliver_failure(queue, job, outcome, delay)


def deliver_batch(
    reports: Sequence[tuple[str, Job[Any], AttemptResult, float | None]],
) -> list[AttemptOutcome]:
    """Report several attempts together: ``(queue, job, attempt, delay)`` each, as
    :func:`deliver_outcome` and :func:`deliver_cancel` would, in order; their outcomes.

    The successes' acks are written together, one :class:`~.pipelining.AckStream` per
    connection, and their replies read together (one round trip for the lot); an ack
    whose reply is unknown is sent again on its own (:func:`deliver_ack`, idempotent
    under its token), a stale token reads as ``discarded``. Failures and cancels are
    reported one by one.
    """
    outcomes: list[AttemptOutcome] = [AttemptOutcome.DISCARDED] * len(reports)
    streams: dict[int, AckStream] = {}
    places: dict[PendingAck, int] = {}
    try:
        for index, (queue, job, attempt, delay) in enumerate(reports):
            if isinstance(attempt.exception, JobCancelled):
                outcomes[index] = deliver_cancel(queue, job)
            elif not attempt.ok:
                outcomes[index] = deliver_failure(queue, job, attempt, delay)
            else:
                ref = queue_ref(queue)
                result = seal(attempt.result_json or "null")
                ack = PendingAck(queue, ref.keys, job.id, job.token, result, job.result_ttl)
                client = ref.client()
                stream = streams.get(id(client))
                if stream is None:
                    stream = streams[id(client)] = AckStream(client)
                stream.send(ack)
                places[ack] = index
        for stream in streams.values():
            for ack, verdict in stream.collect():
                if verdict is True:
                    outcomes[places[ack]] = AttemptOutcome.SUCCEEDED
                elif isinstance(verdict, LeaseLost):
                    logger.error("%s; discarding this run", verdict)
                else:  # the reply is unknown: sent again on its own
                    outcomes[places[ack]] = deliver_ack(ack)
    finally:
        for stream in streams.values():
            stream.close()
    return outcomes


def _cancel_ttl(queue: str, job: Job[Any]) -> int:
    """Seconds a job cancelled while it ran keeps its record (as ``Job.cancel()``: >= 1)."""
    return max(1, job.result_ttl or queue_ref(queue).config.result_ttl)


def deliver_cancel(queue: str, job: Job[Any]) -> AttemptOutcome:
    """End ``job``'s attempt as cancelled (``cancel_running.lua``), retrying while Redis is
    unreachable; ``cancelled`` or ``discarded``."""
    ref = queue_ref(queue)

    def deliver() -> AttemptOutcome:
        client = ref.client()
        ttl = _cancel_ttl(queue, job)
        run.execute(client, commands.cancel_running(ref.keys, job.id, job.token, ttl))
        return AttemptOutcome.CANCELLED

    return retry_while_unreachable(job.id, deliver)


def read_record(client: redis.Redis, keys: QueueKeys, job_id: str) -> dict[bytes, bytes] | None:
    """The record of a job whose run the master ends (:func:`.commands.read_job`;
    ``{}`` when it is gone), or ``None`` when it is not a hash: a foreign write replaced it
    (``WRONGTYPE``). There is nothing to report on such a record; the poller's reclaim of
    its lease puts the job in the failed store with an error saying so.

    Raises:
        RedisUnavailable: Redis cannot be reached.
        redis.ResponseError: any other error reply.
    """
    try:
        return run.execute(client, commands.read_job(keys, job_id))
    except redis.ResponseError as exc:
        if not str(exc).startswith("WRONGTYPE"):
            raise
        logger.warning(
            "%s: its record in Redis is corrupt (not a hash); it goes to the failed store "
            "when its lease expires",
            job_id,
        )
        return None


def _held_job(queue: str, job_id: str, token: int) -> tuple[QueueRef, Job[Any]] | None:
    """The queue's handle and the job ``job_id`` when its record still holds the attempt
    under ``token``; ``None`` when the record is gone or another attempt holds it.

    Raises:
        RedisUnavailable: Redis cannot be reached.
    """
    ref = queue_ref(queue)
    fields = read_record(ref.client(), ref.keys, job_id)
    if not fields:
        return None
    job = Job.from_fields(job_id, fields)
    return (ref, job) if job.token == token else None


def cancel_lost_attempt(queue: str, job_id: str, token: int, reason: str) -> AttemptOutcome | None:
    """The master's hard stop: end as cancelled the job whose child it killed (or lost)
    after its cancel was asked, and log its line with ``reason=``. ``None`` when there is
    nothing to end (the record is gone, or the attempt ended under another token).

    Raises:
        RedisUnavailable: Redis cannot be reached (nothing changed; report again later).
    """
    held = _held_job(queue, job_id, token)
    if held is None:
        return None
    ref, job = held
    keys, client = ref.keys, ref.client()
    try:
        ttl = _cancel_ttl(queue, job)
        run.execute(client, commands.cancel_running(keys, job_id, token, ttl))
    except LeaseLost:
        return None
    _log_line(job, queue, AttemptOutcome.CANCELLED, None, reason, None)
    return AttemptOutcome.CANCELLED


def fail_lost_attempt(
    queue: str, job_id: str, token: int, exc: BaseException
) -> AttemptOutcome | None:
    """Fail the attempt of a job whose process died or overran (the master's report).

    Applies the job's retry policy, sends the outcome signal and logs the
    line with ``reason=``. Returns ``None`` when there is nothing to report
    (the record is gone, or the attempt was already reclaimed under another
    token).

    Raises:
        RedisUnavailable: Redis cannot be reached (nothing changed; report again later).
    """
    held = _held_job(queue, job_id, token)
    if held is None:
        return None  # gone, or already reclaimed and handed to someone else
    ref, job = held
    keys, client = ref.keys, ref.client()
    attempt = failure(exc)
    try:
        job_function: JobSpec | None = registry.resolve(job)
    except UnknownJob:
        job_function = None
    delay, note = next_delay(job_function, job, attempt)
    attempt = attempt.noted(note)
    try:
        fail = commands.fail(
            keys,
            job.id,
            job.token,
            seal(attempt.error_json(job.worker)),
            -1 if delay is None else int(delay * 1000),
            Retention.of(ref.config),
        )
        result = run.execute(client, fail).outcome
    except LeaseLost:
        return None
    reported = AttemptOutcome(result)
    conclude(job_function, job, queue, attempt, reported, delay, reason=str(exc))
    return reported


def hand_back(queue: str, job_id: str, token: int) -> bool:
    """Give a reserved job back without spending an attempt; whether it was handed back.

    Refused (it finished, or was reclaimed): nothing to do. Redis unreachable:
    logged; the lease expires and the poller re-delivers the job (attempt
    counted).
    """
    ref = queue_ref(queue)
    try:
        run.execute(ref.client(), commands.release(ref.keys, job_id, token))
    except LeaseLost:
        return False
    except RedisUnavailable as exc:
        logger.warning("could not hand %s back (%s); its lease will expire", job_id, exc)
        return False
    logger.info("handed %s back to queue %s unstarted", job_id, queue)
    return True


def conclude(
    job_function: JobSpec | None,
    job: Job[Any],
    queue: str,
    attempt: AttemptResult,
    reported: AttemptOutcome,
    delay: float | None,
    *,
    duration: float | None = None,
    reason: str | None = None,
) -> None:
    """End a reported attempt: send its outcome signal (unless discarded) and log its line.

    ``delay`` (seconds) is the retry's, passed on only with ``retrying``;
    ``duration`` (seconds) how long the job ran, ``reason`` why the master failed it.
    """
    if reported not in (AttemptOutcome.DISCARDED, AttemptOutcome.CANCELLED):
        announce(job_function, job, attempt, delay if reported is AttemptOutcome.RETRYING else None)
    _log_line(job, queue, reported, duration, reason, attempt, delay)


async def aconclude(
    job_function: JobSpec | None,
    job: Job[Any],
    queue: str,
    attempt: AttemptResult,
    reported: AttemptOutcome,
    delay: float | None,
    *,
    duration: float,
) -> None:
    """:func:`conclude` for an async job, on the worker's event loop (sync signal receivers
    run in ``sync_to_async``'s thread, where they may use the ORM)."""
    if reported not in (AttemptOutcome.DISCARDED, AttemptOutcome.CANCELLED):
        retry = delay if reported is AttemptOutcome.RETRYING else None
        await aannounce(job_function, job, attempt, retry)
    _log_line(job, queue, reported, duration, None, attempt, delay)


#: Longest exception message quoted in a log line (the stored error keeps it whole).
MESSAGE_LIMIT = 300

#: What to do about an attempt that failed with one of these, appended to its log line.
_ADVICE: dict[type[BaseException], str] = {
    WorkerLost: (
        "the process running the job died: signal 9 is usually the kernel's out-of-memory "
        "killer (see dmesg; lower --max-memory or give the job less to hold), another signal "
        "or exit code a crash or os._exit in the job's code (see the lines above)"
    ),
    UnknownJob: (
        "deploy the code that defines this job to every worker, and restart the workers "
        "after changing it"
    ),
}


def _error_text(attempt: AttemptResult) -> str:
    """``'<type>: <message>'`` of a failed attempt, the message cut at :data:`MESSAGE_LIMIT`."""
    exception = attempt.exception
    message = str(exception) if attempt.message is None else attempt.message
    if len(message) > MESSAGE_LIMIT:
        message = message[:MESSAGE_LIMIT] + "..."
    return f"{type(exception).__name__}: {message}"


def _log_line(
    job: Job[Any],
    queue: str,
    reported: AttemptOutcome,
    duration: float | None,
    reason: str | None,
    attempt: AttemptResult | None,
    delay: float | None = None,
) -> None:
    extra = f"duration_ms={int(duration * 1000)}" if duration is not None else f"reason={reason!r}"
    if reported is AttemptOutcome.RETRYING and delay is not None:
        extra += f" retry_in={delay:.1f}s"
    level = logging.INFO
    exc_info: BaseException | None = None
    exception = None if attempt is None else attempt.exception
    if (
        attempt is not None
        and exception is not None
        and reported in (AttemptOutcome.RETRYING, AttemptOutcome.FAILED)
    ):
        if reason is None:  # a reason (the master failed the attempt) says it already
            extra += f" error={_error_text(attempt)!r}"
        advice = _ADVICE.get(type(exception))
        if advice is not None:
            level = logging.ERROR
            extra += f" ({advice})"
        elif reported is AttemptOutcome.RETRYING:
            level = logging.WARNING
        else:
            level = logging.ERROR
        if reported is AttemptOutcome.FAILED and reason is None:  # else: no traceback to show
            if attempt.scrubbed:  # the exception's own traceback would show the secret
                extra += "\n" + attempt.traceback.rstrip()
            else:
                exc_info = exception
    logger.log(
        level,
        "%s %s queue=%s attempt=%d/%d outcome=%s %s",
        printable(job.name),  # a newline in a name read from Redis cannot forge a line
        printable(job.id),
        queue,
        job.attempts,
        job.max_attempts,
        reported,
        extra,
        exc_info=exc_info,
    )
