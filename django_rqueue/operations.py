"""Alias of :mod:`django_rqueue.ops.operations`: staff actions, e.g. ``pause_queue(queue)``."""

from __future__ import annotations

from .ops.operations import (
    ACTIONS,
    BATCH,
    ActionReport,
    BulkResult,
    EmptyResult,
    empty_queue,
    pause_queue,
    perform,
    perform_many,
    process_failed,
    resume_queue,
)

__all__ = [
    "ACTIONS",
    "BATCH",
    "ActionReport",
    "BulkResult",
    "EmptyResult",
    "empty_queue",
    "pause_queue",
    "perform",
    "perform_many",
    "process_failed",
    "resume_queue",
]
