"""The OpenTelemetry job middleware: a ``send`` span per enqueue, a ``process`` span per attempt.

Spans, names and attributes follow the OpenTelemetry messaging semantic conventions
(``docs/messaging/messaging-spans.md``, status *Development*), with literal attribute
names rather than the ``opentelemetry-semantic-conventions`` package (whose versions
are pre-releases):

- ``send <queue>``, kind ``PRODUCER``, made by :meth:`OpenTelemetryMiddleware.enqueue`
  before the job is written (it marks the message's creation: it ends before the write
  and does not time it). Its context is injected into the job's headers with the global
  propagator (``opentelemetry.propagate.inject``: W3C ``traceparent``/``tracestate``
  and ``baggage`` unless configured otherwise), as Celery's instrumentation injects it
  into the message headers. Tracing never makes an enqueue fail: what would take the
  headers past :data:`~django_rqueue.headers.MAX_HEADERS_BYTES` (a large ``baggage``) is
  left out, and logged.
- ``process <queue>``, kind ``CONSUMER``, around each attempt
  (:meth:`OpenTelemetryMiddleware.attempt`): its parent is the context extracted from
  the job's headers, and it links to that context too (the conventions' "SHOULD link to
  the message's creation context"; Celery's consumer span is a child, Sidekiq's a link:
  both views work). The extracted context is current while the job runs, its baggage
  included. A job enqueued without a trace context starts a trace of its own.
- A periodic entry's run starts a new trace (no parent, whatever is current where it is
  enqueued, as sentry-sdk starts a new trace per Celery Beat run); its ``send`` span
  links to the entry: a link carrying ``rqueue.periodic.entry`` (to the span current
  where the run was enqueued if there is one, as an admin's "run now" in a traced
  request, else to no span, which the API allows for a link with attributes).

Attributes, on both spans: ``messaging.system`` (``"rqueue"``),
``messaging.destination.name`` (the queue), ``messaging.message.id`` (the job's id),
``messaging.operation.type`` and ``messaging.operation.name`` (``send``/``process``),
``rqueue.job.name``; on ``process`` spans ``rqueue.job.attempt`` (from 1) and
``rqueue.job.max_attempts``; on a periodic run's ``send`` span ``rqueue.periodic.entry``.

Failure: an attempt that raises has its exception recorded on its span (an
``exception`` event), status ``ERROR`` and ``error.type`` (the exception's qualified
class name), whether the job will be retried or not: the span is the attempt, and the
attempt failed (the conventions: a failed operation's span has status ``ERROR``).
The exception is :class:`~django_rqueue.exceptions.Retry`, raised by the job to be run
again later, which is flow control rather than a failure, as Celery's instrumentation
treats its ``Task.retry()``: the span keeps status ``UNSET`` and gets
``rqueue.retry.reason``, unless no attempt is left (the job then fails: ``ERROR``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from ...exceptions import Retry
from ...headers import MAX_HEADERS_BYTES
from ...middleware import EnqueueCall, JobMiddleware

if TYPE_CHECKING:
    from ...context import JobContext

logger = logging.getLogger(__name__)

#: The instrumentation scope's name (``trace.get_tracer``'s first argument).
SCOPE = "django_rqueue.contrib.opentelemetry"
#: ``messaging.system``: a custom value, lower-case as the conventions' well-known ones.
SYSTEM = "rqueue"

# Attribute names: the messaging conventions', then our own namespace.
MESSAGING_SYSTEM = "messaging.system"
MESSAGING_DESTINATION_NAME = "messaging.destination.name"
MESSAGING_MESSAGE_ID = "messaging.message.id"
MESSAGING_OPERATION_TYPE = "messaging.operation.type"
MESSAGING_OPERATION_NAME = "messaging.operation.name"
ERROR_TYPE = "error.type"
JOB_NAME = "rqueue.job.name"
JOB_ATTEMPT = "rqueue.job.attempt"
JOB_MAX_ATTEMPTS = "rqueue.job.max_attempts"
PERIODIC_ENTRY = "rqueue.periodic.entry"
RETRY_REASON = "rqueue.retry.reason"

#: The operations (``messaging.operation.type`` and ``.name``, the span name's first word).
SEND = "send"
PROCESS = "process"


def _attributes(operation: str, queue: str, job_id: str, name: str) -> dict[str, AttributeValue]:
    return {
        MESSAGING_SYSTEM: SYSTEM,
        MESSAGING_DESTINATION_NAME: queue,
        MESSAGING_MESSAGE_ID: job_id,
        MESSAGING_OPERATION_TYPE: operation,
        MESSAGING_OPERATION_NAME: operation,
        JOB_NAME: name,
    }


def error_type(exc: BaseException) -> str:
    """``error.type`` of ``exc``: its class's qualified name (``module.Class``; a builtin's
    bare name), as the conventions ask for an exception."""
    cls = type(exc)
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


class OpenTelemetryMiddleware(JobMiddleware):
    """Traces every job: ``send <queue>`` spans at enqueue, ``process <queue>`` spans per
    attempt (see the module). Built once per process without arguments; it takes the
    tracer from the global tracer provider, so a provider set up later (in
    ``worker_process_init``) is the one used. With the API alone and no SDK set up, the
    spans are non-recording and nothing is added to the headers.
    """

    def __init__(self) -> None:
        self.tracer = trace.get_tracer(SCOPE)

    def enqueue(self, call: EnqueueCall) -> None:
        """Make the ``send <queue>`` span of ``call`` and inject its context into
        ``call.headers`` (a periodic run's in a new trace, linked to its entry)."""
        attributes = _attributes(SEND, call.queue, call.job_id, call.name)
        parent: Context | None = None  # the current context
        links: list[Link] = []
        if call.entry is not None:
            attributes[PERIODIC_ENTRY] = call.entry
            current = trace.get_current_span().get_span_context()
            links.append(Link(current, {PERIODIC_ENTRY: call.entry}))
            parent = Context()
        span = self.tracer.start_span(
            f"{SEND} {call.queue}",
            context=parent,
            kind=SpanKind.PRODUCER,
            attributes=attributes,
            links=links,
        )
        try:
            carrier: dict[str, str] = {}
            propagate.inject(carrier, context=trace.set_span_in_context(span, parent))
            call.headers.update(_within_bound(call.headers, carrier, call.name))
        finally:
            span.end()

    def attempt(self, context: JobContext) -> AbstractContextManager[object]:
        """A context manager that makes the attempt's ``process <queue>`` span current,
        a child of (and linked to) the context in the job's headers."""
        return self._process(context)

    @contextmanager
    def _process(self, context: JobContext) -> Iterator[None]:
        job = context.job
        parent = propagate.extract(job.headers)
        producer = trace.get_current_span(parent).get_span_context()
        attributes = _attributes(PROCESS, job.queue, job.id, job.name)
        attributes[JOB_ATTEMPT] = context.attempt
        attributes[JOB_MAX_ATTEMPTS] = job.max_attempts
        # The extracted context is made current as a whole, so the job sees its baggage too.
        token = otel_context.attach(parent)
        try:
            with self.tracer.start_as_current_span(
                f"{PROCESS} {job.queue}",
                kind=SpanKind.CONSUMER,
                attributes=attributes,
                links=[Link(producer)] if producer.is_valid else [],
                record_exception=False,
                set_status_on_exception=False,
            ) as span:
                try:
                    yield
                except Retry as exc:
                    if context.attempt < job.max_attempts:
                        span.set_attribute(RETRY_REASON, exc.reason or str(exc))
                    else:
                        _failed(span, exc)
                    raise
                except BaseException as exc:
                    _failed(span, exc)
                    raise
        finally:
            otel_context.detach(token)


def _within_bound(
    headers: dict[str, str], injected: dict[str, str], job_name: str
) -> dict[str, str]:
    """``injected`` without its largest entries while ``headers`` with it would exceed
    :data:`~django_rqueue.headers.MAX_HEADERS_BYTES` (a large ``baggage``): tracing must
    not make an enqueue fail; what is left out is logged."""
    while injected and not _fits({**headers, **injected}):
        name = max(injected, key=lambda n: len(injected[n]))
        logger.warning(
            "%s: header %r (%d characters) left out: the headers would exceed %d bytes",
            job_name,
            name,
            len(injected.pop(name)),
            MAX_HEADERS_BYTES,
        )
    return injected


def _fits(headers: dict[str, str]) -> bool:
    """Whether ``headers`` take at most :data:`MAX_HEADERS_BYTES` as JSON; no JSON is made
    when a bound says so (a character takes at most 6 bytes, as ``\\u00XX``)."""
    chars = sum(len(k) + len(v) + 6 for k, v in headers.items()) + 2
    if 6 * chars <= MAX_HEADERS_BYTES:
        return True
    text = json.dumps(headers, ensure_ascii=False, separators=(",", ":"))
    return len(text.encode("utf-8")) <= MAX_HEADERS_BYTES


def _failed(span: trace.Span, exc: BaseException) -> None:
    """Record ``exc`` on ``span`` as its failure."""
    span.record_exception(exc, escaped=True)
    span.set_attribute(ERROR_TYPE, error_type(exc))
    span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
