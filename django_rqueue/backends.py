"""Alias of :mod:`django_rqueue.tasks.backend`, the path settings name the backend at.

::

    TASKS = {"default": {"BACKEND": "django_rqueue.backends.RQueueBackend"}}

On Django 5.2 importing it without the ``django-tasks`` backport raises
``ImproperlyConfigured`` naming the extra to install.
"""

from __future__ import annotations

from .tasks.backend import RQueueBackend, TaskJobFunction, job_function_of, task_job_function

__all__ = ["RQueueBackend", "TaskJobFunction", "job_function_of", "task_job_function"]
