"""OpenTelemetry tracing of jobs: a job middleware on ``opentelemetry-api`` alone.

List ``"django_rqueue.contrib.opentelemetry.OpenTelemetryMiddleware"`` in
``RQUEUE["MIDDLEWARE"]`` and install the extra ``django-rqueue[opentelemetry]``; the
application sets up the SDK (provider, exporter) as for any other instrumentation. Each
enqueue then makes a ``send <queue>`` span whose context travels in the job's headers,
and each attempt a ``process <queue>`` span, a child of it (:mod:`.middleware`).

The name is loaded on first use (PEP 562), so importing the package needs no Django setup.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .middleware import OpenTelemetryMiddleware

__all__ = ["OpenTelemetryMiddleware"]


def __getattr__(name: str) -> Any:
    if name == "OpenTelemetryMiddleware":
        from .middleware import OpenTelemetryMiddleware

        return OpenTelemetryMiddleware
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
