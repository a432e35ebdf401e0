"""The bench's django-rqueue job (found by the worker's autodiscovery of ``<app>.jobs``)."""

from __future__ import annotations

from django_rqueue import job

from .record import record


@job(name="bench.noop")
def noop(sent: float, due: float, out: str) -> None:
    record(sent, due, out)
