"""Alias of :mod:`django_rqueue.tasks.api`: where the ``django.tasks`` API comes from.

A setting that names one of the framework's own backends can name it here,
e.g. ``"django_rqueue.tasks_api.ImmediateBackend"``.

Raises:
    ImproperlyConfigured: on import, on Django 5.2 when the ``django-tasks``
        backport is not installed (the message names the extra to install).
"""

from __future__ import annotations

from .tasks.api import (
    EXTRA,
    MODULE,
    BaseTaskBackend,
    ImmediateBackend,
    InvalidTask,
    Task,
    TaskContext,
    TaskError,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    default_task_backend,
    normalize_json,
    task,
    task_backends,
    task_enqueued,
    task_finished,
    task_started,
)

__all__ = [
    "MODULE",
    "BaseTaskBackend",
    "ImmediateBackend",
    "InvalidTask",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "default_task_backend",
    "normalize_json",
    "task",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
    "EXTRA",
]
