"""The bench's ``django.tasks`` task, run by django-rqueue's backend (``TASKS`` in settings)."""

from __future__ import annotations

from django_rqueue.tasks_api import task

from .record import record


@task(queue_name="bench")
def noop_task(sent: float, due: float, out: str) -> None:
    record(sent, due, out)
