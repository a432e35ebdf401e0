"""The app's configuration: on ready, it registers the system checks and the ``task:`` and
``rqueue:`` resolvers."""

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
        """Register the system checks and the resolvers of ``task:`` and ``rqueue:`` job
        names."""
        from . import checks  # noqa: F401 - registers the system checks

        registry.add_resolver(registry.TASK_PREFIX, _task_job_function)
        registry.add_resolver(registry.RQUEUE_PREFIX, _own_job_function)


def _task_job_function(path: str) -> JobSpec:
    """The job of the ``django.tasks`` task at module ``path`` (a ``"task:..."`` job name)."""
    # Imported on use: the backend needs the tasks API, which Django 5.2 lacks
    # without the django-tasks backport (ImproperlyConfigured then, as before).
    from .tasks.backend import task_job_function

    return task_job_function(path)


def _own_job_function(name: str) -> JobSpec:
    """The package's own job ``"rqueue:<name>"`` (a workflow's finisher).

    Raises:
        UnknownJob: no such job.
    """
    # Imported on use: the finisher builds on decorators, which import workflows.signature.
    from .workflows.finish import own_job

    return own_job(name)
