"""``@job``: turn a function into a job that ``.delay()`` sends to a queue."""

from __future__ import annotations

import datetime
import inspect
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, Concatenate, Literal, Protocol, overload

from . import registry
from .argument_check import ArgumentCheck
from .backoff import BackoffPolicy
from .context import JobContext
from .job_functions import AsyncContextJobFunction as AsyncContextJobFunction
from .job_functions import AsyncJobFunction as AsyncJobFunction
from .job_functions import BaseJobFunction as BaseJobFunction
from .job_functions import ContextJobFunction as ContextJobFunction
from .job_functions import JobFunction as JobFunction
from .options import (
    MAX_NAME_LENGTH,
    MAX_PRIORITY,
    MIN_PRIORITY,
    JobOptions,
    expires_value,
)
from .sensitive import Sensitive

__all__ = [
    "MAX_NAME_LENGTH",
    "MAX_PRIORITY",
    "MIN_PRIORITY",
    "ArgumentCheck",
    "AsyncContextJobFunction",
    "AsyncJobFunction",
    "BaseJobFunction",
    "ContextJobFunction",
    "JobFunction",
    "JobOptions",
    "job",
]


class _Decorator(Protocol):
    """What ``@job(...)`` returns: an async function gets an :class:`AsyncJobFunction`."""

    @overload
    def __call__[**P, R](  # type: ignore[overload-overlap]
        self, func: Callable[P, Coroutine[Any, Any, R]], /
    ) -> AsyncJobFunction[P, R]: ...

    @overload
    def __call__[**P, R](self, func: Callable[P, R], /) -> JobFunction[P, R]: ...


class _ContextDecorator(Protocol):
    """What ``@job(takes_context=True, ...)`` returns."""

    @overload
    def __call__[**P, R](  # type: ignore[overload-overlap]
        self, func: Callable[Concatenate[JobContext, P], Coroutine[Any, Any, R]], /
    ) -> AsyncContextJobFunction[P, R]: ...

    @overload
    def __call__[**P, R](
        self, func: Callable[Concatenate[JobContext, P], R], /
    ) -> ContextJobFunction[P, R]: ...


@overload
def job[**P, R](  # type: ignore[overload-overlap]
    func: Callable[P, Coroutine[Any, Any, R]], /
) -> AsyncJobFunction[P, R]: ...


@overload
def job[**P, R](func: Callable[P, R], /) -> JobFunction[P, R]: ...


@overload
def job[**P, R](
    *,
    takes_context: Literal[True],
    name: str | None = None,
    queue: str | None = None,
    priority: int = 0,
    timeout: float | None = None,
    max_attempts: int | None = None,
    backoff: BackoffPolicy | None = None,
    result_ttl: int | None = None,
    unique_key: str | Callable[..., str] | None = None,
    unique_ttl: int | None = None,
    expires: float | datetime.timedelta | datetime.datetime | None = None,
    sensitive: Iterable[str] = (),
) -> _ContextDecorator: ...


@overload
def job[**P, R](
    *,
    takes_context: Literal[False] = False,
    name: str | None = None,
    queue: str | None = None,
    priority: int = 0,
    timeout: float | None = None,
    max_attempts: int | None = None,
    backoff: BackoffPolicy | None = None,
    result_ttl: int | None = None,
    unique_key: str | Callable[..., str] | None = None,
    unique_ttl: int | None = None,
    expires: float | datetime.timedelta | datetime.datetime | None = None,
    sensitive: Iterable[str] = (),
) -> _Decorator: ...


def job(
    func: Callable[..., Any] | None = None,
    /,
    *,
    takes_context: bool = False,
    name: str | None = None,
    queue: str | None = None,
    priority: int = 0,
    timeout: float | None = None,
    max_attempts: int | None = None,
    backoff: BackoffPolicy | None = None,
    result_ttl: int | None = None,
    unique_key: str | Callable[..., str] | None = None,
    unique_ttl: int | None = None,
    expires: float | datetime.timedelta | datetime.datetime | None = None,
    sensitive: Iterable[str] = (),
) -> BaseJobFunction[Any, Any] | Callable[[Callable[..., Any]], BaseJobFunction[Any, Any]]:
    """Decorate a function as a job, bare (``@job``) or with options (``@job(queue=...)``).

    ``priority`` is -100..100 (higher first, default 0); ``timeout`` and
    ``unique_ttl`` are seconds; ``backoff`` is ``"exponential"``, ``"odd_minutes"``
    (:mod:`django_rqueue.backoff`) or a callable ``(attempt, exception) ->
    seconds | None``; ``unique_key`` a string or a callable of the job's
    arguments. ``expires``: a job no worker has started by then is never run
    (seconds or a ``timedelta`` from each enqueue, or an aware datetime; see
    :meth:`BaseJobFunction.using`). Whether ``queue`` is declared is checked at
    ``.delay()``, when settings are read.
    ``takes_context=True`` passes a :class:`JobContext` as the first argument
    when the job runs (``.delay()`` takes the arguments after it).
    ``sensitive``: names of parameters whose values people never see: the admin,
    ``rqueue_failed`` and the logs show ``"********"`` instead, whether the value
    was passed by keyword or by position (:mod:`django_rqueue.sensitive`); the job,
    signal receivers and ``get_job()`` get the real values.

    Raises:
        ValueError: an option is out of range or of the wrong type,
            ``name`` starts with ``"task:"`` (the names of ``django.tasks`` tasks) or
            ``"rqueue:"`` (the package's own jobs, such as a workflow's finisher), or
            a ``sensitive`` name is not a parameter of the function (at decoration).
        TypeError: ``sensitive`` is a single string, not a list or tuple of names.
    """
    if name is not None and name.startswith(registry.TASK_PREFIX):
        raise ValueError(f"job names starting with {registry.TASK_PREFIX!r} are for django.tasks")
    if name is not None and name.startswith(registry.RQUEUE_PREFIX):
        raise ValueError(
            f"job names starting with {registry.RQUEUE_PREFIX!r} are for django_rqueue's own jobs"
        )
    if not isinstance(takes_context, bool):
        raise ValueError(f"takes_context must be True or False, got {takes_context!r}")
    options = JobOptions(
        queue=queue,
        priority=priority,
        timeout=timeout,
        max_attempts=max_attempts,
        backoff=backoff,
        result_ttl=result_ttl,
        unique_key=unique_key,
        unique_ttl=unique_ttl,
        expires=expires_value(expires),
    )

    def decorate(f: Callable[..., Any]) -> BaseJobFunction[Any, Any]:
        if not callable(f):
            raise TypeError(f"@job decorates a function, not {type(f).__name__}")
        kind: type[BaseJobFunction[Any, Any]]
        if inspect.iscoroutinefunction(f):
            kind = AsyncContextJobFunction if takes_context else AsyncJobFunction
        else:
            kind = ContextJobFunction if takes_context else JobFunction
        job_function = kind(f, name or f"{f.__module__}.{f.__qualname__}", options)
        job_function.sensitive = Sensitive.of(f, sensitive, skip=int(takes_context))
        registry.register(job_function)
        return job_function

    if func is not None:
        return decorate(func)
    return decorate
