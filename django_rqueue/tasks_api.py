"""Alias of :mod:`django_rqueue.tasks.api`: where the ``django.tasks`` API comes from.

A setting that names one of the framework's own backends can name it here,
e.g. ``"django_rqueue.tasks_api.ImmediateBackend"``.

Raises:
    ImproperlyConfigured: on import, on Django 5.2 when the ``django-tasks``
        backport is not installed (the message names the extra to install).
"""

from __future__ import annotations

from .tasks.api import *  # noqa: F403 - every name of the API, as its __all__ lists them
from .tasks.api import EXTRA as EXTRA
from .tasks.api import __all__ as __all__
