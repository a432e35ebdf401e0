"""bench/regression.py's ``otel`` layer: the OpenTelemetry SDK in every process, as the
documentation's "Tracing" guide sets it up, exporting into memory (nothing leaves the host).

``set_up()`` runs in the enqueuing process; the worker's processes set it up at
``worker_process_init`` (connected by bench/jobs.py when ``BENCH_LAYER=otel``).
"""

from __future__ import annotations

from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

#: The ``RQUEUE["MIDDLEWARE"]`` entry of the layer.
MIDDLEWARE = "django_rqueue.contrib.opentelemetry.OpenTelemetryMiddleware"


def set_up() -> None:
    """A tracer provider with a batch processor into an in-memory exporter."""
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(InMemorySpanExporter()))
    trace.set_tracer_provider(provider)


def on_process_init(sender: object, **kwargs: Any) -> None:
    """``worker_process_init``'s receiver: each worker process sets up its own provider."""
    set_up()
