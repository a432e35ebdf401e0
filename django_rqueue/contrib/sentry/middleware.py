"""The job middleware the Sentry integration installs: trace headers at enqueue, a scope,
a transaction and the error report around each attempt, the check-ins of periodic runs.

Modelled on sentry-sdk's own queue integrations (``sentry_sdk/integrations/``): the
headers ``sentry-trace`` and ``baggage`` in the job, as Celery's and Huey's; a new
isolation scope with cleared breadcrumbs per attempt and a ``queue.process``
transaction continuing the trace, named after the job (``TransactionSource.TASK``), as
Celery's and RQ's; a failure reported only when it is the job's last, as RQ's; the job's
arguments in the event only with ``send_default_pii``, as all of them. It does nothing
while no Sentry client with the integration is active.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import Iterator
from contextlib import AbstractContextManager
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import sentry_sdk
from sentry_sdk.consts import OP, SPANDATA
from sentry_sdk.scope import should_send_default_pii
from sentry_sdk.tracing import TransactionSource
from sentry_sdk.utils import capture_internal_exceptions, event_from_exception

from ... import registry
from ...conf import get_config
from ...exceptions import JobCancelled, JobTimeout, Reject, Retry
from ...execution import AttemptResult, next_delay
from ...middleware import EnqueueCall, JobMiddleware
from ...sensitive import scrub
from . import crons
from .options import ORIGIN, Options, current

if TYPE_CHECKING:
    from sentry_sdk._types import Event, EventProcessor, Hint

    from ...context import JobContext
    from ...job import Job

#: ``messaging.system`` of the spans (as the OpenTelemetry instrumentation's).
SYSTEM = "rqueue"
#: The event's ``extra`` key holding the job (as RQ's ``rq-job``).
EXTRA = "rqueue-job"
#: What stands for the arguments without ``send_default_pii`` (sentry-sdk's own
#: ``SENSITIVE_DATA_SUBSTITUTE``).
FILTERED = "[Filtered]"
#: The attribute set on an exception reported here: the worker's log line of the same
#: failure (``django_rqueue.worker``, ERROR with the exception) is then no second event.
#: (An attribute: exceptions cannot be weakly referenced.)
REPORTED = "_rqueue_sentry_reported"


class Outcome(StrEnum):
    """What a failed attempt means for its job (the event's ``rqueue.outcome`` tag)."""

    #: The job's last attempt failed: reported, level ``error``.
    FAILED = "failed"
    #: The job runs again (its backoff, or a :class:`~django_rqueue.exceptions.Retry`):
    #: reported, level ``warning``, only with ``report_retries=True`` (never for ``Retry``).
    RETRYING = "retrying"
    #: :class:`~django_rqueue.exceptions.Reject`: failed on purpose, not reported.
    REJECTED = "rejected"
    #: :class:`~django_rqueue.exceptions.JobCancelled` (or its asyncio cancellation):
    #: not reported.
    CANCELLED = "cancelled"


def outcome_of(context: JobContext, exc: BaseException) -> Outcome:
    """What ``exc``, raised by attempt ``context.attempt`` of ``context.job``, makes of it.

    Whether the job runs again is the worker's own decision
    (:func:`~django_rqueue.execution.next_delay`: attempts left and the backoff policy,
    asked once more here), taken before the worker records the failure.
    """
    if isinstance(exc, Reject):
        return Outcome.REJECTED
    if isinstance(exc, JobCancelled | asyncio.CancelledError):
        return Outcome.CANCELLED
    job_function = registry.get(context.job.name)
    delay, _ = next_delay(job_function, context.job, AttemptResult(exception=exc))
    return Outcome.FAILED if delay is None else Outcome.RETRYING


class SentryMiddleware(JobMiddleware):
    """Installed by :class:`~django_rqueue.contrib.sentry.RqueueIntegration` (do not list it
    in ``RQUEUE["MIDDLEWARE"]``: ``sentry_sdk.init()`` installs it)."""

    def enqueue(self, call: EnqueueCall) -> None:
        """A periodic run: the ``in_progress`` check-in of its tick (with
        ``monitor_periodic``), no trace (each tick starts its own, as Celery Beat's). Any
        other job: the current trace's ``sentry-trace`` and ``baggage`` headers, from a
        ``queue.publish`` span when a transaction is open."""
        options = current()
        if options is None:
            return
        with capture_internal_exceptions():
            if call.entry is not None:
                entry = get_config().schedule.get(call.entry)
                if entry is not None and options.monitors(call.entry):
                    call.headers.update(
                        crons.open_check_in(entry, with_config=options.monitor_config)
                    )
                return
            scope = sentry_sdk.get_current_scope()
            if scope.span is None:
                call.headers.update(scope.iter_trace_propagation_headers())
                return
            with scope.span.start_child(op=OP.QUEUE_PUBLISH, name=call.name, origin=ORIGIN) as span:
                span.set_data(SPANDATA.MESSAGING_SYSTEM, SYSTEM)
                span.set_data(SPANDATA.MESSAGING_DESTINATION_NAME, call.queue)
                span.set_data(SPANDATA.MESSAGING_MESSAGE_ID, call.job_id)
                call.headers.update(scope.iter_trace_propagation_headers(span=span))

    def attempt(self, context: JobContext) -> AbstractContextManager[object]:
        """A new isolation scope tagged with the job, a ``queue.process`` transaction
        continuing the enqueuer's trace, the failure reported (:class:`Outcome`), the
        periodic run's check-in closed."""
        options = current()
        if options is None:
            return contextlib.nullcontext()
        return _attempt(context, options)


@contextlib.contextmanager
def _attempt(context: JobContext, options: Options) -> Iterator[None]:
    job = context.job
    with sentry_sdk.isolation_scope() as scope:
        scope.clear_breadcrumbs()
        scope.set_tag("rqueue.job", job.name)
        scope.set_tag("rqueue.queue", job.queue)
        scope.set_tag("rqueue.attempt", str(context.attempt))
        scope.set_tag("rqueue.job_id", job.id)
        scope.add_event_processor(_event_processor(weakref.ref(job), context.attempt))
        transaction = sentry_sdk.continue_trace(
            dict(job.headers),
            op=OP.QUEUE_PROCESS,
            name=job.name,
            source=TransactionSource.TASK,
            origin=ORIGIN,
        )
        sampling = {"rqueue_job": {"id": job.id, "name": job.name, "queue": job.queue}}
        with sentry_sdk.start_transaction(transaction, custom_sampling_context=sampling) as span:
            span.set_data(SPANDATA.MESSAGING_SYSTEM, SYSTEM)
            span.set_data(SPANDATA.MESSAGING_DESTINATION_NAME, job.queue)
            span.set_data(SPANDATA.MESSAGING_MESSAGE_ID, job.id)
            span.set_data(SPANDATA.MESSAGING_MESSAGE_RETRY_COUNT, context.attempt - 1)
            if context.attempt == 1 and job.enqueued_at and job.started_at:
                latency = (job.started_at - job.enqueued_at).total_seconds() * 1000
                span.set_data(SPANDATA.MESSAGING_MESSAGE_RECEIVE_LATENCY, max(0, round(latency)))
            raised: BaseException | None = None
            try:
                yield
            except BaseException as exc:  # re-raised below, past the transaction's
                raised = exc  # __exit__, which would make every exception an error
                with capture_internal_exceptions():
                    _failed(context, options, exc, span)
            else:
                span.set_status("ok")
                with capture_internal_exceptions():
                    crons.close_check_in(job.headers, ok=True)
    if raised is not None:
        raise raised


def _failed(context: JobContext, options: Options, exc: BaseException, span: Any) -> None:
    """Report the failure of ``exc`` as :class:`Outcome` says, set the transaction's status,
    close a periodic run's check-in when the job will not run again."""
    outcome = outcome_of(context, exc)
    if outcome is Outcome.CANCELLED:
        span.set_status("cancelled")
    elif outcome is Outcome.REJECTED or isinstance(exc, Retry):
        span.set_status("aborted")  # control flow, as Celery's Retry/Reject/Ignore
    else:
        span.set_status("internal_error")  # a retried attempt failed too
    sentry_sdk.set_tag("rqueue.outcome", outcome.value)
    report = outcome is Outcome.FAILED or (
        outcome is Outcome.RETRYING and options.report_retries and not isinstance(exc, Retry)
    )
    if report:
        client = sentry_sdk.get_client()
        event, hint = event_from_exception(
            exc, client_options=client.options, mechanism={"type": "rqueue", "handled": False}
        )
        event["level"] = "error" if outcome is Outcome.FAILED else "warning"
        hidden = _sensitive_values(context.job)
        if hidden and "exception" in event:
            event["exception"] = _scrubbed(event["exception"], hidden)
        if isinstance(exc, JobTimeout):  # one issue per job, whatever the stack (as RQ's)
            event["fingerprint"] = ["rqueue", "JobTimeout", context.job.name]
        sentry_sdk.capture_event(event, hint=hint)
        with contextlib.suppress(AttributeError):  # a class with __slots__ and no __dict__
            setattr(exc, REPORTED, True)
    if outcome is not Outcome.RETRYING:
        crons.close_check_in(context.job.headers, ok=False)


def drop_logged_duplicate(event: Event, hint: Hint) -> Event | None:
    """A global event processor: drops the event sentry-sdk's logging integration makes of a
    log record whose exception was reported here already (the worker logs each final
    failure at ERROR with its exception; sentry-sdk's own deduplication misses it when the
    attempt ran in another context, an ``async def`` job's task)."""
    exc_info = hint.get("exc_info") if "log_record" in hint else None
    if exc_info and getattr(exc_info[1], REPORTED, False) is True:
        return None
    return event


def _event_processor(job_ref: weakref.ref[Job[Any]], attempt: int) -> EventProcessor:
    """Adds the job under ``extra["rqueue-job"]`` to the events of its attempt; its
    arguments only with ``send_default_pii`` (and then with ``@job(sensitive=...)``'s
    hidden)."""

    def processor(event: Event, hint: Hint) -> Event | None:
        job = job_ref()
        if job is None:
            return event
        with capture_internal_exceptions():
            described: dict[str, Any] = {
                "id": job.id,
                "name": job.name,
                "queue": job.queue,
                "attempt": attempt,
                "max_attempts": job.max_attempts,
                "enqueued_at": job.enqueued_at.isoformat() if job.enqueued_at else None,
            }
            if should_send_default_pii():
                described["args"], described["kwargs"] = _shown_arguments(job)
            else:
                described["args"] = described["kwargs"] = FILTERED
            event.setdefault("extra", {})[EXTRA] = described
        return event

    return processor


def _sensitive_values(job: Job[Any]) -> list[str]:
    """The texts of ``job``'s ``@job(sensitive=...)`` arguments (``[]``: none)."""
    job_function = registry.get(job.name)
    sensitive = job_function.sensitive if job_function is not None else None
    return [] if sensitive is None else sensitive.values(job.args, job.kwargs)


def _scrubbed(value: Any, hidden: list[str]) -> Any:
    """``value`` (an event's ``exception`` part: messages, frames and their local
    variables, as text) with each of ``hidden`` masked in every string, as the worker
    masks the stored error (:func:`~django_rqueue.sensitive.scrub`)."""
    if isinstance(value, str):
        return scrub(value, hidden)
    if isinstance(value, dict):
        return {key: _scrubbed(item, hidden) for key, item in value.items()}
    if isinstance(value, list):
        return [_scrubbed(item, hidden) for item in value]
    return value


def _shown_arguments(job: Job[Any]) -> tuple[list[Any], dict[str, Any]]:
    """``job``'s arguments with its ``@job(sensitive=...)`` ones hidden."""
    job_function = registry.get(job.name)
    sensitive = job_function.sensitive if job_function is not None else None
    if sensitive is None:
        return list(job.args), dict(job.kwargs)
    return sensitive.mask(job.args, job.kwargs)
