"""``OpenTelemetryMiddleware`` in one process: the ``send`` span at enqueue and the context in
the headers, the ``process`` span of each attempt in an in-process worker (sync and async) and
in EAGER mode, failures and retries, periodic runs; read back from the SDK's in-memory exporter.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from opentelemetry import baggage, trace
from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracer, SpanKind, StatusCode
from pytest_django.fixtures import Settings as SettingsFixture

from django_rqueue import JobContext, JobStatus, Retry, job
from django_rqueue.contrib.opentelemetry.middleware import OpenTelemetryMiddleware
from django_rqueue.middleware import EnqueueCall
from django_rqueue.periodic import runtime
from tests.jobs_app.jobs import fail_always, fault_async_overrun, record, sleepy_timeout
from tests.support.inprocess import poller_thread, run_worker

from .conftest import attribute

#: The in-process worker closes old database connections around each job, as real ones do.
pytestmark = pytest.mark.usefixtures("worker_may_close_db_connections")

#: What a job below saw of the current span: (trace id, span id, name, baggage "tenant").
SEEN: list[tuple[int, int, str, object]] = []


def _current() -> tuple[int, int, str, object]:
    span = trace.get_current_span()
    context = span.get_span_context()
    return (
        context.trace_id,
        context.span_id,
        getattr(span, "name", ""),
        baggage.get_baggage("tenant"),
    )


@job(name="tests.contrib.otel.sees_span")
def sees_span() -> None:
    SEEN.append(_current())


@job(name="tests.contrib.otel.asees_span")
async def asees_span() -> None:
    await asyncio.sleep(0)
    SEEN.append(_current())


@job(name="tests.contrib.otel.asks_retry", takes_context=True, max_attempts=2)
def asks_retry(context: JobContext) -> None:
    raise Retry(delay=0, reason=f"not ready at attempt {context.attempt}")


def by_name(spans: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in spans.get_finished_spans() if s.name == name]


def ids(span: ReadableSpan) -> tuple[int, int]:
    assert span.context is not None
    return span.context.trace_id, span.context.span_id


def traceparent(span: ReadableSpan) -> str:
    assert span.context is not None
    trace_id, span_id = ids(span)
    return f"00-{trace_id:032x}-{span_id:016x}-{span.context.trace_flags:02x}"


def messaging(operation: str, queue: str, job_id: str, name: str) -> dict[str, Any]:
    return {
        "messaging.system": "rqueue",
        "messaging.destination.name": queue,
        "messaging.message.id": job_id,
        "messaging.operation.type": operation,
        "messaging.operation.name": operation,
        "rqueue.job.name": name,
    }


def test_delay_makes_a_send_span_under_the_callers_and_injects_it(
    spans: InMemorySpanExporter, ledger: str
) -> None:
    tracer = trace.get_tracer("tests")
    with tracer.start_as_current_span("request") as request:
        queued = record.delay(ledger, "a")
    [send] = by_name(spans, "send default")
    assert send.kind is SpanKind.PRODUCER
    assert send.parent is not None and send.parent.span_id == request.get_span_context().span_id
    assert ids(send)[0] == request.get_span_context().trace_id
    assert dict(send.attributes or {}) == messaging("send", "default", queued.id, record.name)
    queued.refresh()  # as the record stores them
    assert queued.headers == {"traceparent": traceparent(send)}


def test_delay_many_makes_one_send_span_per_job_each_in_its_own_headers(
    spans: InMemorySpanExporter, ledger: str
) -> None:
    queued = record.delay_many([((ledger, str(n)), {}) for n in range(3)])
    sends = {attribute(s, "messaging.message.id"): s for s in by_name(spans, "send default")}
    assert set(sends) == {j.id for j in queued}
    for job_ in queued:
        job_.refresh()
        assert job_.headers == {"traceparent": traceparent(sends[job_.id])}


def test_each_attempt_is_a_process_span_child_of_and_linked_to_the_send_span(
    spans: InMemorySpanExporter,
) -> None:
    SEEN.clear()
    token = otel_context.attach(baggage.set_baggage("tenant", "t-42"))
    try:
        queued = [sees_span.delay(), asees_span.delay()]
    finally:
        otel_context.detach(token)
    run_worker(burst=True)
    sends = {attribute(s, "messaging.message.id"): s for s in by_name(spans, "send default")}
    processes = by_name(spans, "process default")
    assert len(processes) == 2
    for span, seen in zip(processes, SEEN, strict=True):
        job_id = attribute(span, "messaging.message.id")
        send = sends[job_id]
        assert span.kind is SpanKind.CONSUMER
        assert ids(span)[0] == ids(send)[0]
        assert span.parent is not None and span.parent.span_id == ids(send)[1]
        assert [(link.context.trace_id, link.context.span_id) for link in span.links] == [ids(send)]
        # The span is current while the job runs, in a sync and in an async job, with the
        # baggage of the code that enqueued it.
        assert seen == (*ids(span), "process default", "t-42")
        assert span.status.status_code is StatusCode.UNSET
    attributes = {attribute(s, "messaging.message.id"): dict(s.attributes or {}) for s in processes}
    for job_ in queued:
        job_.refresh()
        assert job_.status is JobStatus.SUCCEEDED
        assert attributes[job_.id] == {
            **messaging("process", "default", job_.id, job_.name),
            "rqueue.job.attempt": 1,
            "rqueue.job.max_attempts": job_.max_attempts,
        }


def test_a_failed_attempt_records_the_exception_and_status_error(
    spans: InMemorySpanExporter, ledger: str
) -> None:
    queued = fail_always.using(max_attempts=1).delay(ledger, "f")
    run_worker(burst=True)
    queued.refresh()
    assert queued.status is JobStatus.FAILED
    [span] = by_name(spans, "process default")
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "RuntimeError: boom f"
    assert span.attributes is not None and span.attributes["error.type"] == "RuntimeError"
    [event] = span.events
    assert event.name == "exception" and event.attributes is not None
    assert event.attributes["exception.type"] == "RuntimeError"
    assert event.attributes["exception.message"] == "boom f"


@pytest.mark.usefixtures("worker_may_close_db_connections")
def test_a_soft_timeout_is_an_error_of_its_attempt_sync_and_async(
    spans: InMemorySpanExporter, ledger: str
) -> None:
    sleepy_timeout.delay(ledger, "sync", 5)
    fault_async_overrun.delay(ledger, "async", 5)
    run_worker(burst=True)
    processes = by_name(spans, "process default")
    assert len(processes) == 2
    for span in processes:
        assert span.status.status_code is StatusCode.ERROR
        assert attribute(span, "error.type") == "django_rqueue.exceptions.JobTimeout"
        assert span.status.description is not None
        assert span.status.description.startswith("JobTimeout: job exceeded its timeout")


def test_an_attempt_that_fails_and_is_retried_is_an_error_too(
    spans: InMemorySpanExporter, ledger: str
) -> None:
    fail_always.delay(ledger, "r")  # 3 attempts: the first is retried
    run_worker(burst=True)
    [span] = by_name(spans, "process default")
    assert span.attributes is not None and span.attributes["rqueue.job.attempt"] == 1
    assert span.status.status_code is StatusCode.ERROR


def test_a_retry_asked_for_is_not_an_error_unless_no_attempt_is_left(
    spans: InMemorySpanExporter, ledger: str
) -> None:
    queued = asks_retry.delay()
    with poller_thread():  # promotes the retry (delay 0)
        run_worker(max_jobs=2)
    queued.refresh()
    assert queued.status is JobStatus.FAILED and queued.attempts == 2
    first, last = sorted(
        by_name(spans, "process default"), key=lambda s: attribute(s, "rqueue.job.attempt")
    )
    assert first.status.status_code is StatusCode.UNSET and first.events == ()
    assert first.attributes is not None
    assert first.attributes["rqueue.retry.reason"] == "not ready at attempt 1"
    assert last.status.status_code is StatusCode.ERROR
    assert last.attributes is not None and "rqueue.retry.reason" not in last.attributes
    assert last.attributes["error.type"] == "django_rqueue.exceptions.Retry"
    # Both attempts are children of the one send span.
    [send] = by_name(spans, "send default")
    assert {s.parent.span_id for s in (first, last) if s.parent} == {ids(send)[1]}


def test_eager_mode_traces_the_attempt_under_the_send_span(
    spans: InMemorySpanExporter, settings: SettingsFixture, ledger: str
) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "EAGER": True}
    SEEN.clear()
    tracer = trace.get_tracer("tests")
    with tracer.start_as_current_span("request") as request:
        sees_span.delay()
        # The caller's span is current again after the attempt.
        assert trace.get_current_span() is request
    [send] = by_name(spans, "send default")
    [process] = by_name(spans, "process default")
    assert process.parent is not None and process.parent.span_id == ids(send)[1]
    assert ids(process)[0] == ids(send)[0] == request.get_span_context().trace_id
    assert SEEN == [(*ids(process), "process default", None)]


@pytest.mark.parametrize("traced", [True, False])
def test_a_periodic_run_starts_a_new_trace_linked_to_its_entry(
    spans: InMemorySpanExporter, settings: SettingsFixture, ledger: str, traced: bool
) -> None:
    entry = {"job": record.name, "every": 60, "args": [ledger, "p"]}
    settings.RQUEUE = {**settings.RQUEUE, "SCHEDULE": {"ping": entry}}
    tracer = trace.get_tracer("tests")
    if traced:  # "run now" from code that is traced (an admin request)
        with tracer.start_as_current_span("request") as request:
            queued = runtime.run_now("ping")
        caller = request.get_span_context()
    else:
        queued = runtime.run_now("ping")
        caller = trace.INVALID_SPAN_CONTEXT
    [send] = by_name(spans, "send default")
    assert send.parent is None
    assert ids(send)[0] != caller.trace_id
    assert send.attributes is not None and send.attributes["rqueue.periodic.entry"] == "ping"
    [link] = send.links
    assert (link.context.trace_id, link.context.span_id) == (caller.trace_id, caller.span_id)
    assert dict(link.attributes or {}) == {"rqueue.periodic.entry": "ping"}
    queued.refresh()
    assert queued.headers == {"traceparent": traceparent(send)}


def test_a_baggage_too_large_for_the_headers_is_left_out_not_the_enqueue(
    spans: InMemorySpanExporter, ledger: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Within the W3C Baggage limits (4096 bytes an entry, 8192 in all, which the propagator
    # enforces), but not with the traceparent beside it within the headers' 8 KiB.
    large = baggage.set_baggage("b", "y" * 4090, baggage.set_baggage("a", "x" * 4090))
    token = otel_context.attach(large)
    try:
        queued = record.delay(ledger, "big")
        small = record.delay_many([((ledger, "small"), {})])[0]
    finally:
        otel_context.detach(token)
    queued.refresh()
    [send, _] = by_name(spans, "send default")
    assert queued.headers == {"traceparent": traceparent(send)}
    assert f"{record.name}: header 'baggage' (8185 characters) left out" in caplog.text
    small.refresh()
    assert set(small.headers) == {"traceparent"}
    # A baggage that fits is carried.
    token = otel_context.attach(baggage.set_baggage("tenant", "t-1"))
    try:
        fits = record.delay(ledger, "fits")
    finally:
        otel_context.detach(token)
    fits.refresh()
    assert fits.headers["baggage"] == "tenant=t-1"


def test_without_a_recording_tracer_no_header_is_added() -> None:
    middleware = OpenTelemetryMiddleware()
    middleware.tracer = NoOpTracer()
    call = EnqueueCall("some.job", "default", "default:1", (), {})
    middleware.enqueue(call)
    assert call.headers == {}
