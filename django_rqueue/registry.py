"""Job functions by name. Workers run only what is registered here.

A payload names its job; the worker looks the name up here and never imports
a path taken from Redis, so whoever can write to Redis still cannot make a
worker run arbitrary code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.utils.module_loading import autodiscover_modules

if TYPE_CHECKING:
    from .decorators import JobFunction

_registry: dict[str, JobFunction[Any, Any]] = {}


def register(job_function: JobFunction[Any, Any]) -> None:
    """Register ``job_function`` under its name (a later one with the same name wins)."""
    _registry[job_function.name] = job_function


def get(name: str) -> JobFunction[Any, Any] | None:
    """Return the job registered as ``name``, or ``None``."""
    return _registry.get(name)


def names() -> list[str]:
    return sorted(_registry)


def autodiscover() -> None:
    """Import the ``jobs`` module of every installed app (as workers do at start)."""
    autodiscover_modules("jobs")
