"""``OpenTelemetryMiddleware`` across real processes: this process enqueues (its spans in its
in-memory exporter), a real ``rqueue_work`` runs the jobs and the periodic entry's runs, its
children set up the SDK at ``worker_process_init`` and write their spans to a file
(tests/jobs_app/tracing.py): the trace goes from one process to the other through the job's
headers, and a periodic run's trace starts in the poller child.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.jobs_app.jobs import fail_always, record
from tests.jobs_app.tracing import read_spans
from tests.support.processes import STARTUP, Processes, command_env
from tests.support.waiting import wait_until

from .conftest import OTEL, attribute

pytestmark = pytest.mark.slow


def hex_id(value: int, digits: int) -> str:
    return f"0x{value:0{digits}x}"


def process_span_of(exported: list[dict[str, Any]], job_id: str) -> dict[str, Any] | None:
    for span in exported:
        attributes = span["attributes"]
        if span["name"] == "process default" and attributes["messaging.message.id"] == job_id:
            return span
    return None


def tick_spans(exported: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(send, process) of each periodic run whose process span is written."""
    found = []
    for send in exported:
        if send["name"] == "send default" and "rqueue.periodic.entry" in send["attributes"]:
            process = process_span_of(exported, send["attributes"]["messaging.message.id"])
            if process is not None:
                found.append((send, process))
    return found


def test_the_trace_continues_in_a_real_worker_and_each_periodic_run_starts_one(
    spans: InMemorySpanExporter, tmp_path: Path, ledger: str
) -> None:
    exported_to = tmp_path / "spans.jsonl"
    entry = {"job": record.name, "every": 1, "args": [ledger, "tick"]}
    env = command_env(
        extra={
            "RQUEUE_TEST_MIDDLEWARE": json.dumps([OTEL]),
            "RQUEUE_TEST_OTEL_SPANS": str(exported_to),
            "RQUEUE_TEST_SCHEDULE": json.dumps({"tick": entry}),
        }
    )
    with trace.get_tracer("tests").start_as_current_span("request") as request:
        ok = record.delay(ledger, "ok")
        bad = fail_always.using(max_attempts=1).delay(ledger, "bad")
    sends = {
        attribute(s, "messaging.message.id"): hex_id(s.context.span_id, 16)
        for s in spans.get_finished_spans()
        if s.name == "send default" and s.context is not None
    }
    assert set(sends) == {ok.id, bad.id}

    processes = Processes(tmp_path / "commands")
    try:
        worker = processes.start(
            "rqueue_work", "--queues", "default", "--concurrency", "1", env=env
        )

        def done() -> bool:
            exported = read_spans(exported_to)
            return bool(
                process_span_of(exported, ok.id)
                and process_span_of(exported, bad.id)
                and tick_spans(exported)
            )

        wait_until(done, timeout=STARTUP + 10, message="spans missing")
        worker.signal(signal.SIGTERM)
        assert worker.wait(20) == 0, processes.reports()
    finally:
        processes.kill_all()
    exported = read_spans(exported_to)

    # The jobs enqueued here: children of this process's send spans, in the request's trace.
    trace_id = hex_id(request.get_span_context().trace_id, 32)
    for job_ in (ok, bad):
        span = process_span_of(exported, job_.id)
        assert span is not None
        send_id = sends[job_.id]
        assert span["kind"] == "SpanKind.CONSUMER"
        assert span["context"]["trace_id"] == trace_id
        assert span["parent_id"] == send_id
        assert [link["context"]["span_id"] for link in span["links"]] == [send_id]
        resource = span["resource"]["attributes"]
        assert resource["rqueue.role"] == "child" and resource["process.pid"] != os.getpid()
        assert span["attributes"]["messaging.system"] == "rqueue"
        assert span["attributes"]["rqueue.job.attempt"] == 1
    ok_span, bad_span = process_span_of(exported, ok.id), process_span_of(exported, bad.id)
    assert ok_span is not None and bad_span is not None
    assert ok_span["status"]["status_code"] == "UNSET"
    assert bad_span["status"]["status_code"] == "ERROR"
    assert bad_span["attributes"]["error.type"] == "RuntimeError"
    [event] = bad_span["events"]
    assert event["name"] == "exception"
    assert event["attributes"]["exception.message"] == "boom bad"

    # A periodic run: a new trace made in the poller child, linked to its entry, continued
    # by the worker child that runs it.
    tick_send, process = tick_spans(exported)[0]
    assert tick_send["resource"]["attributes"]["rqueue.role"] == "poller"
    assert tick_send["kind"] == "SpanKind.PRODUCER" and tick_send["parent_id"] is None
    assert tick_send["context"]["trace_id"] != trace_id
    [link] = tick_send["links"]
    assert link["attributes"] == {"rqueue.periodic.entry": "tick"}
    assert process["resource"]["attributes"]["rqueue.role"] == "child"
    assert process["context"]["trace_id"] == tick_send["context"]["trace_id"]
    assert process["parent_id"] == tick_send["context"]["span_id"]
