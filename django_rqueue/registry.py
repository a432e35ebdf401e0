"""Job functions by name. Workers run only what is registered here.

A payload names its job; the worker looks the name up here and never imports
a path taken from Redis, so whoever can write to Redis still cannot make a
worker run arbitrary code.

The one exception is a name with a prefix that has a resolver
(:func:`add_resolver`): ``django.tasks`` tasks (:mod:`django_rqueue.backends`), and
the package's own jobs (:data:`RQUEUE_PREFIX`: a workflow's finisher), whose resolvers
:class:`~django_rqueue.apps.RqueueConfig` installs. Such a job is
named :data:`TASK_PREFIX` + the task's module path, and the worker imports that
path, as every ``django.tasks`` worker does, then runs it only if it is a
``django.tasks.Task`` whose backend is an ``RQueueBackend``. No ``@job`` may take
a name with either prefix.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.utils.module_loading import autodiscover_modules

from .exceptions import UnknownJob

if TYPE_CHECKING:
    from .job import Job
    from .types import JobSpec

_registry: dict[str, JobSpec] = {}
#: Name prefix -> what returns the job function of a name with it (given the rest of the name).
_resolvers: dict[str, Callable[[str], JobSpec]] = {}

#: Where workers find jobs: said by :class:`UnknownJob` and the ``rqueue.E023`` check.
DISCOVERY_HINT = (
    "Workers import the 'jobs' module of every app in INSTALLED_APPS (<app>.jobs) at start: "
    "define the @job there, or import it from there, and restart the workers"
)

#: Names of ``django.tasks`` task jobs: ``"task:<module path of the task function>"``.
TASK_PREFIX = "task:"
#: Names of the package's own jobs (a workflow's finisher, ``"rqueue:workflow.finish"``),
#: resolved by the resolver :class:`~django_rqueue.apps.RqueueConfig` installs.
RQUEUE_PREFIX = "rqueue:"


def add_resolver(prefix: str, resolver: Callable[[str], JobSpec]) -> None:
    """Let :func:`resolve` find a job whose name starts with ``prefix`` by calling
    ``resolver`` with the rest of its name (which raises :class:`UnknownJob`)."""
    _resolvers[prefix] = resolver


def register(job_function: JobSpec) -> None:
    """Register ``job_function`` under its name (a later one with the same name wins)."""
    _registry[job_function.name] = job_function


def get(name: str) -> JobSpec | None:
    """Return the job registered as ``name``, or ``None``."""
    return _registry.get(name)


def resolve(job: Job[Any]) -> JobSpec:
    """Return the job function that runs ``job`` (a record read from Redis).

    A job whose name starts with a prefix given to :func:`add_resolver` is resolved
    by that prefix's resolver: a task job (:data:`TASK_PREFIX`) by importing its
    module path (:func:`django_rqueue.backends.task_job_function`).

    Raises:
        UnknownJob: nothing in this process can run it; the message says why.
    """
    for prefix, resolver in _resolvers.items():
        if job.name.startswith(prefix):
            return resolver(job.name.removeprefix(prefix))
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
