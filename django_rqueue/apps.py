"""The app's configuration: on ready, it registers the system checks and the ``task:`` resolver."""

from __future__ import annotations

from django.apps import AppConfig

from . import registry
from .types import JobSpec


class RqueueConfig(AppConfig):
    """The app ``django_rqueue`` of ``INSTALLED_APPS``."""

    name = "django_rqueue"
    verbose_name = "Rqueue"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Register the system checks and the resolver of ``task:`` job names."""
        from . import checks  # noqa: F401 - registers the system checks

        registry.add_resolver(registry.TASK_PREFIX, _task_job_function)


def _task_job_function(path: str) -> JobSpec:
    """The job of the ``django.tasks`` task at module ``path`` (a ``"task:..."`` job name)."""
    # Imported on use: the backend needs the tasks API, which Django 5.2 lacks
    # without the django-tasks backport (ImproperlyConfigured then, as before).
    from .tasks.backend import task_job_function

    return task_job_function(path)
