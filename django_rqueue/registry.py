"""Job functions by name. Workers run only what is registered here.

A payload names its job; the worker looks the name up here and never imports
a path taken from Redis, so whoever can write to Redis still cannot make a
worker run arbitrary code.

The one exception is a ``django.tasks`` task (:mod:`django_rqueue.backends`):
its job is named :data:`TASK_PREFIX` + the task's module path, and the
worker imports that path, as every ``django.tasks`` worker does, then runs it
only if it is a ``django.tasks.Task`` whose backend is an ``RQueueBackend``.
No ``@job`` may take a name with that prefix.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.utils.module_loading import autodiscover_modules

from .exceptions import UnknownJob

if TYPE_CHECKING:
    from .decorators import JobFunction
    from .job import Job

_registry: dict[str, JobFunction[Any, Any]] = {}

#: Where workers find jobs: said by :class:`UnknownJob` and the ``rqueue.E023`` check.
DISCOVERY_HINT = (
    "Workers import the 'jobs' module of every app in INSTALLED_APPS (<app>.jobs) at start: "
    "define the @job there, or import it from there, and restart the workers"
)

#: Names of ``django.tasks`` task jobs: ``"task:<module path of the task function>"``.
TASK_PREFIX = "task:"


def register(job_function: JobFunction[Any, Any]) -> None:
    """Register ``job_function`` under its name (a later one with the same name wins)."""
    _registry[job_function.name] = job_function


def get(name: str) -> JobFunction[Any, Any] | None:
    """Return the job registered as ``name``, or ``None``."""
    return _registry.get(name)


def resolve(job: Job[Any]) -> JobFunction[Any, Any]:
    """Return the job function that runs ``job`` (a record read from Redis).

    A task job (its name starts with :data:`TASK_PREFIX`) is resolved by
    importing its module path (:func:`django_rqueue.backends.task_job_function`).

    Raises:
        UnknownJob: nothing in this process can run it; the message says why.
    """
    if job.name.startswith(TASK_PREFIX):
        from .backends import task_job_function

        return task_job_function(job.name.removeprefix(TASK_PREFIX))
    job_function = _registry.get(job.name)
    if job_function is None:
        raise UnknownJob(
            f"no @job named {job.name!r} is registered in this worker. {DISCOVERY_HINT}"
        )
    return job_function


def names() -> list[str]:
    """The names of every registered job, sorted."""
    return sorted(_registry)


def modules() -> dict[str, list[str]]:
    """The registered jobs' names by the module that defines their function, both sorted."""
    found: dict[str, list[str]] = {}
    for name in sorted(_registry):
        module = getattr(_registry[name].func, "__module__", None) or "?"
        found.setdefault(module, []).append(name)
    return dict(sorted(found.items()))


def autodiscover() -> None:
    """Import the ``jobs`` module of every installed app (as workers do at start)."""
    autodiscover_modules("jobs")
