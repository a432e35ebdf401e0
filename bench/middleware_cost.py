"""What ``RQUEUE["MIDDLEWARE"]`` costs a ``.delay()`` and an attempt, in-process, interleaved.

Run with any venv that has django-rqueue (no Redis needed)::

    PYTHONPATH=. python -m bench.middleware_cost [--rounds 7] [--calls 20000]
        [--middleware dotted.path.Class ...]

Each round times ``--calls`` calls of each probe one after the other; the report gives
each probe's best round in µs per call:

- ``submission``: ``Plan.submission()``, the Python part of ``.delay()`` up to the write
  (argument check and encoding, the enqueue hooks, the headers' JSON);
- ``attempt``: ``execution.run_attempt()`` of a job doing nothing, as a worker calls it
  (``job_started``, the attempt wraps, the call, the result's JSON).

Both probes run without middleware (``none``) and with the classes given (default: one
no-op :class:`Noop`, which defines both hooks and does nothing). Run the same command
on another checkout for the ``none`` figures of that code. The ``with`` attempt runs a
job carrying the headers the ``with`` submission gave it (a ``traceparent`` for tracing).

``--otel`` sets up OpenTelemetry in the process before the rounds, for
``--middleware django_rqueue.contrib.opentelemetry.OpenTelemetryMiddleware``:
``api`` no SDK (the API's no-op tracer: spans do not record, nothing is injected);
``sdk`` the SDK's ``TracerProvider`` with no span processor (spans record, then are
dropped: the SDK's own cost); ``memory`` the SDK with a ``SimpleSpanProcessor`` into an
``InMemorySpanExporter`` (emptied after each probe), a real export path without I/O.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import timeit
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from django_rqueue.middleware import EnqueueCall, JobMiddleware


class Noop(JobMiddleware):
    """Both hooks, doing nothing: the cost of the machinery alone."""

    def enqueue(self, call: EnqueueCall) -> None:
        pass

    def attempt(self, context: Any) -> AbstractContextManager[object]:
        return contextlib.nullcontext()


def _same(value: Any) -> Any:
    return value


def _set_up_otel(mode: str) -> Callable[[], object]:
    """Set the global tracer provider for ``--otel mode``; what empties its exporter."""
    if mode == "api":
        return lambda: None
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider = TracerProvider()
    trace.set_tracer_provider(provider)
    if mode == "sdk":
        return lambda: None
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter.clear


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--middleware", nargs="*", default=[f"{__name__}.Noop"])
    parser.add_argument("--otel", choices=["api", "sdk", "memory"], default="api")
    args = parser.parse_args()
    drain = _set_up_otel(args.otel)

    import django
    from django.conf import settings

    settings.configure(
        INSTALLED_APPS=["django_rqueue"],
        USE_TZ=True,
        DATABASES={},
        RQUEUE={"QUEUES": {"default": {}}},
    )
    django.setup()
    from django_rqueue import job, middleware
    from django_rqueue.conf import get_config
    from django_rqueue.enqueue.plan import Plan
    from django_rqueue.execution import run_attempt

    @job(name="bench.middleware_cost.nothing")
    def nothing(n: int) -> None:
        pass

    plain = get_config()
    chains = {"none": middleware.EMPTY, "with": middleware.load(tuple(args.middleware))}
    plans = {
        "none": Plan.of(nothing, plain),
        "with": Plan.of(nothing, dataclasses.replace(plain, middleware=tuple(args.middleware))),
    }
    jobs = {mode: plan.submission((1,), {}).job for mode, plan in plans.items()}
    best: dict[str, float] = {}
    for _ in range(args.rounds):
        for mode in ("none", "with"):
            plan, chain = plans[mode], chains[mode]
            took = timeit.timeit(functools.partial(plan.submission, (1,), {}), number=args.calls)
            best[f"submission {mode}"] = min(best.get(f"submission {mode}", took), took)
            drain()
            middleware.chain = functools.partial(_same, chain)  # type: ignore[assignment]
            attempt = functools.partial(run_attempt, nothing, jobs[mode])
            took = timeit.timeit(attempt, number=args.calls)
            best[f"attempt {mode}"] = min(best.get(f"attempt {mode}", took), took)
            drain()
    print(f"middleware: {', '.join(args.middleware)} (opentelemetry: {args.otel})")
    for probe, seconds in best.items():
        print(f"{probe:16} {seconds / args.calls * 1e6:7.2f} µs per call")


if __name__ == "__main__":
    main()
