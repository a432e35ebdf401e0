"""The test process's OpenTelemetry SDK (an in-memory exporter) and the middleware configured."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pytest_django.fixtures import Settings as SettingsFixture

OTEL = "django_rqueue.contrib.opentelemetry.OpenTelemetryMiddleware"


@pytest.fixture(scope="session")
def span_exporter() -> InMemorySpanExporter:
    """The exporter of this process's global tracer provider (set once per process)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    assert trace.get_tracer_provider() is provider, "another test set a provider first"
    return exporter


@pytest.fixture
def spans(
    span_exporter: InMemorySpanExporter, settings: SettingsFixture
) -> Iterator[InMemorySpanExporter]:
    """The middleware in ``RQUEUE["MIDDLEWARE"]``; the exporter, emptied before and after."""
    settings.RQUEUE = {**settings.RQUEUE, "MIDDLEWARE": [OTEL]}
    span_exporter.clear()
    yield span_exporter
    span_exporter.clear()


def attribute(span: ReadableSpan, key: str) -> Any:
    """The value of ``span``'s attribute ``key`` (``KeyError``: none)."""
    assert span.attributes is not None
    return span.attributes[key]
