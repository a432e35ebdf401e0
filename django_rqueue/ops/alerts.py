"""What an operator should look at: overdue scheduled jobs, no worker or poller, corrupt entries.

The admin's overview and ``rqueue_info`` each word a :class:`QueueWarning` their
own way; :mod:`~django_rqueue.ops.monitoring` turns them into check results.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from django.utils import timezone

from .counts import QueueCounts
from .workers import WorkerInfo

#: A scheduled job this many seconds past its run-at means nobody promotes jobs (no poller?).
OVERDUE = 60


class WarningKind(StrEnum):
    """What a :class:`QueueWarning` is about (the admin and rqueue_info each word it their way)."""

    #: The earliest scheduled job of ``queue`` is more than :data:`OVERDUE` seconds late.
    OVERDUE = "overdue"
    #: No worker has published a heartbeat recently.
    NO_WORKER = "no_worker"
    #: Workers are live, but every one runs with ``--without-poller``.
    NO_POLLER = "no_poller"
    #: A worker's entry in the registry is corrupt (``worker``; ``detail`` says how).
    CORRUPT_WORKER = "corrupt_worker"


@dataclass(frozen=True)
class QueueWarning:
    """Something for an operator to look at: see :func:`queue_warnings`, :func:`worker_warnings`."""

    kind: WarningKind
    #: The queue concerned (``OVERDUE`` only).
    queue: str = ""
    #: Whole seconds the earliest scheduled job is late (``OVERDUE`` only).
    late: int = 0
    #: The worker id (``CORRUPT_WORKER`` only).
    worker: str = ""
    #: What is wrong (``CORRUPT_WORKER`` only).
    detail: str = ""


def queue_warnings(
    counts: Iterable[QueueCounts], now: datetime.datetime | None = None
) -> list[QueueWarning]:
    """``OVERDUE`` for each queue whose earliest scheduled job is over :data:`OVERDUE` s late."""
    now = timezone.now() if now is None else now
    found = []
    for each in counts:
        due = each.next_scheduled_at
        if due is not None and (now - due).total_seconds() > OVERDUE:
            late = int((now - due).total_seconds())
            found.append(QueueWarning(WarningKind.OVERDUE, queue=each.queue, late=late))
    return found


def worker_warnings(workers: Sequence[WorkerInfo]) -> list[QueueWarning]:
    """``NO_WORKER`` when no worker is live, ``NO_POLLER`` when none of them runs a poller;
    ``CORRUPT_WORKER`` for each worker whose registry entry is corrupt."""
    if not workers:
        return [QueueWarning(WarningKind.NO_WORKER)]
    found = [
        QueueWarning(WarningKind.CORRUPT_WORKER, worker=w.id, detail="; ".join(w.problems))
        for w in workers
        if w.problems
    ]
    if not any(w.poller for w in workers):
        found.insert(0, QueueWarning(WarningKind.NO_POLLER))
    return found
