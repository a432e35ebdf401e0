"""The OpenTelemetry SDK in a real ``rqueue_work``'s processes, for tests/contrib/opentelemetry.

Imported by the app's ``ready()`` when ``RQUEUE_TEST_OTEL_SPANS`` names a file: each worker
and poller child then sets up a ``TracerProvider`` at ``worker_process_init`` whose spans
are appended to that file as JSON lines (the SDK's own ``ReadableSpan.to_json``), each at
its end (``SimpleSpanProcessor``: a killed poller loses nothing), and flushes it at
``worker_process_shutdown``, as the Tracing how-to tells users to.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

from django_rqueue.signals import ProcessRole, worker_process_init, worker_process_shutdown


def _line(span: ReadableSpan) -> str:
    return str(span.to_json(indent=None)) + "\n"


def set_up(sender: object, role: ProcessRole, pid: int, **kwargs: Any) -> None:
    """A provider exporting to ``RQUEUE_TEST_OTEL_SPANS``, in worker and poller children."""
    if role == ProcessRole.MASTER:
        return
    out = open(os.environ["RQUEUE_TEST_OTEL_SPANS"], "a", encoding="utf-8")
    provider = TracerProvider(resource=Resource.create({"process.pid": pid, "rqueue.role": role}))
    provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=out, formatter=_line)))
    trace.set_tracer_provider(provider)


def flush(sender: object, role: ProcessRole, pid: int, **kwargs: Any) -> None:
    """Flush the provider's spans before the process exits."""
    provider = trace.get_tracer_provider()
    if isinstance(provider, TracerProvider):
        provider.force_flush(5_000)


def read_spans(path: str | Path) -> list[dict[str, Any]]:
    """The spans written to ``path`` so far (a line being written is left out)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines(keepends=True) if line.endswith("\n")]


worker_process_init.connect(set_up, dispatch_uid="tests.tracing.set_up", weak=False)
worker_process_shutdown.connect(flush, dispatch_uid="tests.tracing.flush", weak=False)
