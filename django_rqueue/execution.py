"""Running one attempt of a job, shared by the worker and EAGER mode.

:func:`run_attempt` calls the function and captures the outcome; the caller
reports it (ack / fail in Redis, or in memory for EAGER) and then calls
:func:`announce`, so that both paths send the same signals in the same order.
"""

from __future__ import annotations

import dataclasses
import datetime
import traceback as tb
from typing import TYPE_CHECKING, Any

from . import signals
from .backoff import retry_delay
from .conf import get_config
from .exceptions import Reject, Retry
from .job import Job, JobStatus
from .serialization import dumps, encode_result, loads

if TYPE_CHECKING:
    from .decorators import JobFunction


@dataclasses.dataclass
class Outcome:
    """What one attempt produced: a JSON result, or an exception with its traceback."""

    result_json: str | None = None
    exception: BaseException | None = None
    traceback: str = ""
    #: Replaces ``str(exception)`` as the stored error's message when set.
    message: str | None = None

    @property
    def ok(self) -> bool:
        return self.exception is None

    def error_json(self) -> str:
        """The ``{"type", "message", "traceback"}`` record stored for a failed attempt."""
        return error_record(self.exception, self.traceback, self.message)


def error_record(
    exception: BaseException | None, traceback: str = "", message: str | None = None
) -> str:
    """JSON ``{"type": "module.Class", "message": str, "traceback": str}`` of ``exception``."""
    kind = type(exception)
    return dumps(
        {
            "type": f"{kind.__module__}.{kind.__qualname__}",
            "message": str(exception) if message is None else message,
            "traceback": traceback,
        }
    )


def failure(exception: BaseException) -> Outcome:
    """An Outcome for an exception raised (or made up) outside the job's own code."""
    text = "".join(tb.format_exception(exception)) if exception.__traceback__ else ""
    return Outcome(
        exception=exception, traceback=text or f"{type(exception).__name__}: {exception}\n"
    )


def run_attempt(job_function: JobFunction[Any, Any], job: Job[Any]) -> Outcome:
    """Send ``job_started``, call the function, and capture what happened.

    ``SystemExit`` and every other exception are failures of the attempt
    (``KeyboardInterrupt`` propagates). A return value JSON cannot carry is a
    failure with a ``TypeError`` naming its type. The function is called with
    :meth:`~django_rqueue.decorators.JobFunction.arguments` (a
    ``takes_context`` function gets a :class:`JobContext` first).
    """
    signals.send(signals.job_started, job_function, job=job)
    try:
        args, kwargs = job_function.arguments(job)
        value = job_function.func(*args, **kwargs)
        return Outcome(result_json=encode_result(value))
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # a job's failure is data, not a crash
        return Outcome(exception=exc, traceback=tb.format_exc())


def next_delay(
    job_function: JobFunction[Any, Any] | None, job: Job[Any], outcome: Outcome
) -> float | None:
    """Seconds before the next attempt, or ``None`` when this failure is final.

    Final when attempts are spent, when the job is unknown, when the job
    raised :class:`Reject`, or when the backoff policy returns ``None``. A
    :class:`Retry` with a ``delay`` gives that delay instead of the policy's;
    one with no attempt left says so in the error's message. A backoff policy
    that raises makes the failure final too (it is logged in the traceback).
    """
    exc = outcome.exception
    if job_function is None or exc is None or isinstance(exc, Reject):
        return None
    if job.attempts >= job.max_attempts:
        if isinstance(exc, Retry):
            outcome.message = (
                f"{exc} but no attempt is left "
                f"(attempt {job.attempts} of {job.max_attempts}); not retried"
            )
        return None
    if isinstance(exc, Retry) and exc.delay is not None:
        return exc.delay
    policy = job_function.options.backoff or get_config().queue(job.queue).backoff
    try:
        return retry_delay(policy, job.attempts, exc)
    except Exception as broken:  # a broken policy must not lose the job
        outcome.traceback += f"\n(backoff policy failed: {broken!r}; not retrying)\n"
        return None


def announce(
    job_function: JobFunction[Any, Any] | None,
    job: Job[Any],
    outcome: Outcome,
    delay: float | None,
) -> None:
    """Send ``job_succeeded``, ``job_retrying`` (``delay`` not None) or ``job_failed``."""
    if outcome.ok:
        result = loads(outcome.result_json or "null")
        signals.send(signals.job_succeeded, job_function, job=job, result=result)
    elif delay is not None:
        signals.send(
            signals.job_retrying,
            job_function,
            job=job,
            exception=outcome.exception,
            traceback=outcome.traceback,
            delay=delay,
        )
    else:
        signals.send(
            signals.job_failed,
            job_function,
            job=job,
            exception=outcome.exception,
            traceback=outcome.traceback,
        )


def run_eager(job_function: JobFunction[Any, Any], job: Job[Any]) -> Job[Any]:
    """Run every attempt of ``job`` inline, back to back (EAGER mode); nothing touches Redis.

    Returns the job in its final state (``succeeded`` or ``failed``), with
    ``result``/``error``/``errors`` filled in. Re-raises the last exception
    when ``RQUEUE["EAGER_PROPAGATE"]`` is true.
    """
    now = datetime.datetime.now(datetime.UTC)
    job.enqueued_at = job.run_at = now
    signals.send(signals.job_enqueued, job_function, job=job)
    while True:
        job.attempts += 1
        job.status = JobStatus.RUNNING
        job.started_at = datetime.datetime.now(datetime.UTC)
        outcome = run_attempt(job_function, job)
        delay = next_delay(job_function, job, outcome)  # may reword the error's message
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
        announce(job_function, job, outcome, delay)
        if job.status is JobStatus.SUCCEEDED:
            return job
        if job.status is JobStatus.FAILED:
            if get_config().eager_propagate and outcome.exception is not None:
                raise outcome.exception
            return job
