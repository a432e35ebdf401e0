"""The bench's django-rqueue jobs (found by the worker's autodiscovery of ``<app>.jobs``)."""

from __future__ import annotations

import asyncio

from django_rqueue import job

from .record import record
from .systems import ASYNC_SLEEP


@job(name="bench.noop")
def noop(sent: float, due: float, out: str) -> None:
    record(sent, due, out)


@job(name="bench.sleepy")
async def sleepy(sent: float, due: float, out: str) -> None:
    """The async I/O drain's job: wait on I/O for ``ASYNC_SLEEP`` s, then record."""
    await asyncio.sleep(ASYNC_SLEEP)
    record(sent, due, out)
