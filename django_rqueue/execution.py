"""Running one attempt of a job, shared by the worker and EAGER mode.

:func:`run_attempt` calls the function and captures the outcome; the caller
reports it (ack / fail in Redis, or in memory for EAGER) and then calls
:func:`announce`, so that both paths send the same signals in the same order.

An ``async def`` job runs on an event loop: :func:`arun_attempt` awaits it
(the worker's asyncio runner, ``adelay()`` in EAGER mode), with the soft
timeout as ``asyncio.timeout``; :func:`run_attempt` runs it with
``asyncio.run`` (EAGER ``.delay()`` from sync code). :func:`aannounce` and
:func:`arun_eager` are the async twins of :func:`announce` and :func:`run_eager`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import datetime
import signal
import traceback as tb
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async
from django.dispatch import Signal

from . import eager_outcomes, middleware, signals
from .backoff import retry_delay
from .conf import get_config
from .context import JobContext
from .exceptions import JobTimeout, Reject, Retry
from .job import Job, JobStatus
from .sensitive import scrub
from .serialization import dumps, encode_result, loads

if TYPE_CHECKING:
    from .types import JobSpec

#: Sent in EAGER mode only, just before ``job_enqueued``, with the same sender and ``job``:
#: the ``django.tasks`` bridge sends Django's ``task_enqueued`` from it, since a task's job
#: runs inside its ``enqueue()``. Not public; a live enqueue sends nothing here, so it costs
#: ``.delay()`` nothing.
eager_enqueued = Signal()


@dataclasses.dataclass(frozen=True, slots=True)
class DelayNote:
    """What :func:`next_delay` adds to the stored error of the failure it decided on
    (applied with :meth:`AttemptResult.noted`)."""

    #: Replaces the error's message (a :class:`Retry` with no attempt left says so); ``None``:
    #: the message stays.
    message: str | None = None
    #: Appended to the error's traceback (a backoff policy that raised).
    traceback: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class AttemptResult:
    """What one attempt produced: a JSON result, or an exception with its traceback."""

    #: The return value as JSON, ``None`` when the attempt raised.
    result_json: str | None = None
    #: What the attempt raised, ``None`` when it returned.
    exception: BaseException | None = None
    #: The formatted traceback of :attr:`exception` (``""`` when it returned).
    traceback: str = ""
    #: Replaces ``str(exception)`` as the stored error's message when set.
    message: str | None = None
    #: Whether :attr:`message` and :attr:`traceback` had sensitive values hidden
    #: (:func:`hide_secrets`): the exception object itself still holds them.
    scrubbed: bool = False

    @property
    def ok(self) -> bool:
        return self.exception is None

    def noted(self, note: DelayNote | None) -> AttemptResult:
        """This result with ``note`` (:func:`next_delay`'s) applied to its error: a copy, or
        this result itself when there is no note."""
        if note is None:
            return self
        message = self.message if note.message is None else note.message
        return dataclasses.replace(self, message=message, traceback=self.traceback + note.traceback)

    def error_json(self, worker: str = "") -> str:
        """The ``{"type", "message", "traceback", "worker"}`` record stored for a failed
        attempt; ``worker`` is the id of the worker that ran it (left out when empty)."""
        return error_record(self.exception, self.traceback, self.message, worker)


def error_fields(
    exception: BaseException | None,
    traceback: str = "",
    message: str | None = None,
    worker: str = "",
) -> dict[str, str]:
    """``{"type": "module.Class", "message": str, "traceback": str, "worker": str}`` of
    ``exception``; ``"worker"`` (the id of the worker whose attempt failed) only when given.

    The worker ids of a job's failed attempts are what ``django.tasks``'s
    ``TaskResult.worker_ids`` is built from (:mod:`django_rqueue.backends`);
    ``reclaim.lua`` adds the key itself to the record of an expired lease.
    """
    kind = type(exception)
    record = {
        "type": f"{kind.__module__}.{kind.__qualname__}",
        "message": str(exception) if message is None else message,
        "traceback": traceback,
    }
    if worker:
        record["worker"] = worker
    return record


def error_record(
    exception: BaseException | None,
    traceback: str = "",
    message: str | None = None,
    worker: str = "",
) -> str:
    """:func:`error_fields` as the JSON a job's error record holds."""
    return dumps(error_fields(exception, traceback, message, worker))


def failure(exception: BaseException) -> AttemptResult:
    """An AttemptResult for an exception raised (or made up) outside the job's own code."""
    text = "".join(tb.format_exception(exception)) if exception.__traceback__ else ""
    return AttemptResult(
        exception=exception, traceback=text or f"{type(exception).__name__}: {exception}\n"
    )


def soft_timeout(seconds: float) -> JobTimeout:
    """The :class:`JobTimeout` of an attempt that ran past its ``timeout`` (soft timeout)."""
    return JobTimeout(f"job exceeded its timeout of {seconds:g} s")


def run_attempt(job_function: JobSpec, job: Job[Any]) -> AttemptResult:
    """Send ``job_started``, call the function, and capture what happened.

    ``SystemExit`` and every other exception are failures of the attempt; so
    is ``KeyboardInterrupt``, unless SIGINT raises it in this process (Python's
    default handler is installed: Ctrl-C on an in-process worker or in EAGER
    mode), when it propagates (see :func:`interrupted`). A return value JSON cannot carry is a
    failure with a ``TypeError`` naming its type. The function is called with
    ``JobFunction.arguments`` (a ``takes_context`` function gets a :class:`JobContext`
    first). An ``async def`` function runs to completion on an event loop of its own
    (:func:`run_coroutine`). A failure's message and traceback have the job's
    sensitive values hidden (:func:`hide_secrets`).
    """
    if job_function.is_async:
        return run_coroutine(arun_attempt(job_function, job))
    return hide_secrets(job_function, job, _run_sync_attempt(job_function, job))


def hide_secrets(job_function: JobSpec, job: Job[Any], outcome: AttemptResult) -> AttemptResult:
    """Replace the values of ``job``'s sensitive arguments (``@job(sensitive=...)``) that a
    failed attempt's message or traceback quotes by the mask (:func:`~.sensitive.scrub`).

    Returns a copy with :attr:`AttemptResult.message` and :attr:`AttemptResult.traceback`
    hidden (and :attr:`AttemptResult.scrubbed` set) when one of them quoted a value, else
    ``outcome`` itself.
    """
    sensitive = job_function.sensitive
    if outcome.exception is None or sensitive is None:
        return outcome
    values = sensitive.values(job.args, job.kwargs)
    if not values:
        return outcome
    message = str(outcome.exception) if outcome.message is None else outcome.message
    hidden_message, hidden_traceback = scrub(message, values), scrub(outcome.traceback, values)
    if hidden_message == message and hidden_traceback == outcome.traceback:
        return outcome
    return dataclasses.replace(
        outcome, message=hidden_message, traceback=hidden_traceback, scrubbed=True
    )


def _run_sync_attempt(job_function: JobSpec, job: Job[Any]) -> AttemptResult:
    signals.send(signals.job_started, job_function, job=job)
    wraps = middleware.chain()
    try:
        args, kwargs = job_function.arguments(job)
        if wraps.attempt:  # RQUEUE["MIDDLEWARE"]: around the call alone
            context = JobContext(job=job, attempt=job.attempts)
            value = middleware.call(wraps, context, lambda: job_function.func(*args, **kwargs))
        else:
            value = job_function.func(*args, **kwargs)
        return AttemptResult(result_json=encode_result(value))
    except KeyboardInterrupt as exc:
        if interrupted():
            raise
        return AttemptResult(exception=exc, traceback=tb.format_exc())
    except BaseException as exc:  # a job's failure is data, not a crash
        return AttemptResult(exception=exc, traceback=tb.format_exc())


def interrupted() -> bool:
    """Whether a ``KeyboardInterrupt`` may come from the user rather than from the job's code.

    It may when SIGINT has Python's default handler here (the handler that raises
    it). A worker child ignores SIGINT (its master decides), and an event loop
    started by ``asyncio.run`` installs its own handler, so there a
    ``KeyboardInterrupt`` is the job's own: a failed attempt with that class,
    not a lost worker.
    """
    return signal.getsignal(signal.SIGINT) is signal.default_int_handler


async def arun_attempt(
    job_function: JobSpec, job: Job[Any], *, timeout: float | None = None
) -> AttemptResult:
    """:func:`run_attempt` for an ``async def`` job, awaited on the running event loop.

    ``timeout`` (seconds; ``None``: none) is the soft timeout: the coroutine is
    cancelled and the attempt fails with :class:`JobTimeout` (the traceback
    shows where it was waiting). A ``CancelledError`` of the job's own making
    is a failure like any other; a cancellation of the task running this
    propagates.
    """
    outcome = await _arun_attempt(job_function, job, timeout)
    return hide_secrets(job_function, job, outcome)


async def _arun_attempt(
    job_function: JobSpec, job: Job[Any], timeout: float | None
) -> AttemptResult:
    await signals.asend(signals.job_started, job_function, job=job)
    deadline = asyncio.timeout(timeout)
    wraps = middleware.chain()
    try:
        args, kwargs = job_function.arguments(job)
        if wraps.attempt:  # RQUEUE["MIDDLEWARE"]: around the call alone

            async def timed() -> Any:
                try:
                    async with deadline:
                        return await job_function.func(*args, **kwargs)
                except TimeoutError:
                    if deadline.expired() and timeout is not None:
                        raise soft_timeout(timeout) from None  # as the middleware sees it
                    raise

            context = JobContext(job=job, attempt=job.attempts)
            value = await middleware.acall(wraps, context, timed)
        else:
            async with deadline:
                value = await job_function.func(*args, **kwargs)
        return AttemptResult(result_json=encode_result(value))
    except KeyboardInterrupt as exc:
        if interrupted():
            raise
        return AttemptResult(exception=exc, traceback=tb.format_exc())
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        return AttemptResult(exception=asyncio.CancelledError(), traceback=tb.format_exc())
    except BaseException as exc:  # a job's failure is data, not a crash
        if isinstance(exc, TimeoutError) and deadline.expired() and timeout is not None:
            return AttemptResult(exception=soft_timeout(timeout), traceback=tb.format_exc())
        return AttemptResult(exception=exc, traceback=tb.format_exc())


def run_coroutine[T](coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to completion from sync code: ``asyncio.run`` here, or in a
    thread of its own when this thread already runs an event loop (``.delay()``
    of an async job called from async code in EAGER mode; ``adelay()`` awaits it instead)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="rqueue-eager") as pool:
        return pool.submit(asyncio.run, coroutine).result()


def next_delay(
    job_function: JobSpec | None, job: Job[Any], outcome: AttemptResult
) -> tuple[float | None, DelayNote | None]:
    """Seconds before the next attempt (``None`` when this failure is final), and what to note
    in the stored error (``None``: nothing; apply it with :meth:`AttemptResult.noted`).

    Final when attempts are spent, when the job is unknown, when the job
    raised :class:`Reject`, or when the backoff policy returns ``None``. A
    :class:`Retry` with a ``delay`` gives that delay instead of the policy's;
    one with no attempt left says so in the error's message. A backoff policy
    that raises makes the failure final too (noted in the traceback).
    ``outcome`` is not changed.
    """
    exc = outcome.exception
    if job_function is None or exc is None or isinstance(exc, Reject):
        return None, None
    if job.attempts >= job.max_attempts:
        if isinstance(exc, Retry):
            said = exc if outcome.message is None else outcome.message  # maybe scrubbed
            return None, DelayNote(
                message=f"{said} but no attempt is left "
                f"(attempt {job.attempts} of {job.max_attempts}); not retried"
            )
        return None, None
    if isinstance(exc, Retry) and exc.delay is not None:
        return exc.delay, None
    policy = job_function.options.backoff or get_config().queue(job.queue).backoff
    try:
        return retry_delay(policy, job.attempts, exc), None
    except Exception as broken:  # a broken policy must not lose the job
        return None, DelayNote(traceback=f"\n(backoff policy failed: {broken!r}; not retrying)\n")


def _outcome_signal(
    job: Job[Any], outcome: AttemptResult, delay: float | None
) -> tuple[Signal, dict[str, Any]]:
    """The signal :func:`announce` sends for ``outcome``, and its keyword arguments."""
    if outcome.ok:
        return signals.job_succeeded, {"job": job, "result": loads(outcome.result_json or "null")}
    failed = {"job": job, "exception": outcome.exception, "traceback": outcome.traceback}
    if delay is not None:
        return signals.job_retrying, {**failed, "delay": delay}
    return signals.job_failed, failed


def announce(
    job_function: JobSpec | None,
    job: Job[Any],
    outcome: AttemptResult,
    delay: float | None,
) -> None:
    """Send ``job_succeeded``, ``job_retrying`` (``delay`` not None) or ``job_failed``.

    Nothing is built when the signal has no receivers for ``job_function`` (the result
    is not decoded again for a ``job_succeeded`` nobody listens to: a worker announces
    every job).
    """
    if _listened(job_function, outcome):
        signal, kwargs = _outcome_signal(job, outcome, delay)
        signals.send(signal, job_function, **kwargs)


async def aannounce(
    job_function: JobSpec | None,
    job: Job[Any],
    outcome: AttemptResult,
    delay: float | None,
) -> None:
    """:func:`announce` from async code (sync receivers run in ``sync_to_async``'s thread)."""
    if _listened(job_function, outcome):
        signal, kwargs = _outcome_signal(job, outcome, delay)
        await signals.asend(signal, job_function, **kwargs)


def _listened(job_function: JobSpec | None, outcome: AttemptResult) -> bool:
    """Whether announcing ``outcome`` is worth building: a ``job_succeeded`` nobody listens
    to is skipped (its result would be decoded again for nothing)."""
    return not outcome.ok or signals.job_succeeded.has_listeners(job_function)


def run_eager(job_function: JobSpec, job: Job[Any], *, enqueued: bool = True) -> Job[Any]:
    """Run every attempt of ``job`` inline, back to back (EAGER mode); nothing touches Redis.

    Returns the job in its final state (``succeeded`` or ``failed``), with
    ``result``/``error``/``errors`` filled in, its outcome recorded for the jobs that
    depend on it (:func:`~django_rqueue.eager_outcomes.remember`). Re-raises the last
    exception when ``RQUEUE["EAGER_PROPAGATE"]`` is true. An ``async def`` job runs with
    ``asyncio.run`` (:func:`run_attempt`); from async code, ``adelay()`` awaits
    :func:`arun_eager` instead. ``enqueued=False``: no ``job_enqueued`` (a workflow's node,
    which a live creation writes without that signal).
    """
    _eager_enqueued(job)
    if enqueued:
        signals.send(eager_enqueued, job_function, job=job)
        signals.send(signals.job_enqueued, job_function, job=job)
    while True:
        _eager_started(job)
        outcome = run_attempt(job_function, job)
        outcome, delay = _eager_settle(job_function, job, outcome)
        announce(job_function, job, outcome, delay)
        if _eager_finished(job, outcome):
            return job


async def arun_eager(job_function: JobSpec, job: Job[Any], *, enqueued: bool = True) -> Job[Any]:
    """:func:`run_eager` on the running event loop (``adelay()`` in EAGER mode)."""
    _eager_enqueued(job)
    if enqueued:
        await signals.asend(eager_enqueued, job_function, job=job)
        await signals.asend(signals.job_enqueued, job_function, job=job)
    while True:
        _eager_started(job)
        if job_function.is_async:
            outcome = await arun_attempt(job_function, job)
        else:
            outcome = await sync_to_async(run_attempt)(job_function, job)
        outcome, delay = _eager_settle(job_function, job, outcome)
        await aannounce(job_function, job, outcome, delay)
        if _eager_finished(job, outcome):
            return job


def _eager_enqueued(job: Job[Any]) -> None:
    job.enqueued_at = job.run_at = datetime.datetime.now(datetime.UTC)


def _eager_started(job: Job[Any]) -> None:
    job.attempts += 1
    job.status = JobStatus.RUNNING
    job.started_at = datetime.datetime.now(datetime.UTC)


def _eager_settle(
    job_function: JobSpec, job: Job[Any], outcome: AttemptResult
) -> tuple[AttemptResult, float | None]:
    """Record an EAGER attempt's outcome in ``job``; return it with :func:`next_delay`'s note
    applied (a reworded message), and the retry delay (``None``: final)."""
    delay, note = next_delay(job_function, job, outcome)
    outcome = outcome.noted(note)
    if outcome.ok:
        job.status = JobStatus.SUCCEEDED
        job.result = loads(outcome.result_json or "null")
        job.error = None
    else:
        job.error = loads(outcome.error_json())
        job.errors.append(job.error)
    if not outcome.ok and delay is None:
        job.status = JobStatus.FAILED
    if job.status is not JobStatus.RUNNING:
        job.finished_at = datetime.datetime.now(datetime.UTC)
    else:
        job.status = JobStatus.SCHEDULED
    return outcome, delay


def _eager_finished(job: Job[Any], outcome: AttemptResult) -> bool:
    """Whether the EAGER run is over (then its outcome is remembered); re-raises a final
    failure with ``EAGER_PROPAGATE``."""
    if job.status in (JobStatus.FAILED, JobStatus.SUCCEEDED):
        eager_outcomes.remember(job)
    if job.status is JobStatus.FAILED:
        if get_config().eager_propagate and outcome.exception is not None:
            raise outcome.exception
        return True
    return job.status is JobStatus.SUCCEEDED
