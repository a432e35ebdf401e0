"""Where the ``django.tasks`` API comes from: Django itself, or its backport on Django 5.2.

Django 6.0 and later have ``django.tasks``. On Django 5.2 the same API comes
from the ``django-tasks`` package (module ``django_tasks``), installed by the
``tasks`` extra: ``pip install "django-rqueue[tasks]"``. Everything in
django-rqueue that uses the tasks API imports it from here, so it behaves the
same on every supported Django. A setting that names one of the framework's
own backends can name it here too, at its public path
:mod:`django_rqueue.tasks_api` (an alias of this module), e.g.
``"django_rqueue.tasks_api.ImmediateBackend"``.

Importing this module also registers the tasks framework's system check (it
calls ``check()`` on every ``TASKS`` backend) and its ``setting_changed``
receiver, as importing ``django.tasks`` does on Django 6; so the backport
does not need ``"django_tasks"`` in ``INSTALLED_APPS`` (adding it is harmless).

Raises:
    ImproperlyConfigured: on import, on Django 5.2 when the ``django-tasks``
        backport is not installed (the message names the extra to install).
        The rest of django-rqueue works without it; only the ``django.tasks``
        backend (:mod:`django_rqueue.tasks.backend`) needs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import django
from django.core.exceptions import ImproperlyConfigured

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
]

#: The pip requirement that brings the ``django.tasks`` API to Django 5.2.
EXTRA = "django-rqueue[tasks]"

if TYPE_CHECKING or django.VERSION >= (6, 0):
    from django.tasks import (
        Task,
        TaskContext,
        TaskResult,
        TaskResultStatus,
        default_task_backend,
        task,
        task_backends,
    )
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.backends.immediate import ImmediateBackend
    from django.tasks.base import TaskError
    from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
    from django.tasks.signals import task_enqueued, task_finished, task_started
    from django.utils.json import normalize_json

    #: The package the API comes from (``"django.tasks"`` or ``"django_tasks"``).
    MODULE = "django.tasks"
else:  # Django 5.2: the backport
    try:
        import django_tasks  # noqa: F401
    except ModuleNotFoundError as exc:
        if exc.name != "django_tasks":
            raise
        raise ImproperlyConfigured(
            f"django-rqueue's django.tasks backend needs the django-tasks package on Django "
            f"{django.get_version()} (Django 6.0 and later have django.tasks built in): "
            f'pip install "{EXTRA}"'
        ) from exc
    from django_tasks import (
        TaskContext,
        TaskResult,
        TaskResultStatus,
        checks,  # noqa: F401 - registers check_tasks (the backport's AppConfig.ready does too)
        default_task_backend,
        task,
        task_backends,
    )
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.backends.immediate import ImmediateBackend
    from django_tasks.base import Task, TaskError
    from django_tasks.exceptions import TaskResultDoesNotExist
    from django_tasks.signals import task_enqueued, task_finished, task_started
    from django_tasks.utils import normalize_json

    try:  # the backport's name up to 0.12, then Django's
        from django_tasks.exceptions import InvalidTaskError as InvalidTask
    except ImportError:
        from django_tasks.exceptions import InvalidTask
    MODULE = "django_tasks"
