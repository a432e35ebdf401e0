"""Job functions by name. Workers run only what is registered here.

A payload names its job; the worker looks the name up here and never imports
a path taken from Redis, so whoever can write to Redis still cannot make a
worker run arbitrary code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.utils.module_loading import autodiscover_modules

from .exceptions import UnknownJob

if TYPE_CHECKING:
    from .decorators import JobFunction
    from .job import Job

_registry: dict[str, JobFunction[Any, Any]] = {}


def register(job_function: JobFunction[Any, Any]) -> None:
    """Register ``job_function`` under its name (a later one with the same name wins)."""
    _registry[job_function.name] = job_function


def get(name: str) -> JobFunction[Any, Any] | None:
    """Return the job registered as ``name``, or ``None``."""
    return _registry.get(name)


def resolve(job: Job[Any]) -> JobFunction[Any, Any]:
    """Return the job function that runs ``job`` (a record read from Redis).

    Raises:
        UnknownJob: nothing in this process can run it; the message says why.
    """
    job_function = _registry.get(job.name)
    if job_function is None:
        raise UnknownJob(f"no @job named {job.name!r} is registered in this worker")
    return job_function


def names() -> list[str]:
    return sorted(_registry)


def autodiscover() -> None:
    """Import the ``jobs`` module of every installed app (as workers do at start)."""
    autodiscover_modules("jobs")
