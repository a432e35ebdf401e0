"""The bench's django-rqueue jobs (found by the worker's autodiscovery of ``<app>.jobs``)."""

from __future__ import annotations

import asyncio
import os

from django_rqueue import job
from django_rqueue.signals import worker_process_init

from .record import record
from .systems import ASYNC_SLEEP


@job(name="bench.noop")
def noop(sent: float, due: float, out: str) -> None:
    record(sent, due, out)


@job(name="bench.noop_sensitive", sensitive=("out",))
def noop_sensitive(sent: float, due: float, out: str) -> None:
    """:func:`noop` with an argument hidden from people (bench/regression.py's layer)."""
    record(sent, due, out)


@job(name="bench.sleepy")
async def sleepy(sent: float, due: float, out: str) -> None:
    """The async I/O drain's job: wait on I/O for ``ASYNC_SLEEP`` s, then record."""
    await asyncio.sleep(ASYNC_SLEEP)
    record(sent, due, out)


@job(name="bench.member")
def member(sent: float, out: str) -> int:
    """A chord member (bench/workflows.py): records, and gives 1 to the body."""
    record(sent, 0.0, out)
    return 1


@job(name="bench.body")
def body(results: list[int], sent: float, out: str) -> None:
    """A chord's body: records its run with ``due = -1`` (bench/workflows.py's ``BODY``)."""
    record(sent, -1.0, out)


if os.environ.get("BENCH_LAYER") == "otel":  # bench/regression.py's layer (bench/tracing.py)
    from .tracing import on_process_init

    worker_process_init.connect(on_process_init, dispatch_uid="bench-otel")
