"""Job middleware (``RQUEUE["MIDDLEWARE"]``): classes that see every enqueue before it is
written, may add headers to the job, and wrap every attempt of every job.

A middleware is a class built once per process with no arguments (as Dramatiq's and
Django's are built once); it defines either hook or both:

- :meth:`JobMiddleware.enqueue` sees each job before it is written: ``.delay()``,
  ``.adelay()``, ``.delay_many()`` (once per job), the ``django.tasks`` backend, each run
  of a periodic entry, the jobs and callbacks of a workflow, ``depends_on`` jobs, EAGER
  mode and ``capture_jobs()``. It may add to :attr:`EnqueueCall.headers`; it may raise to
  refuse the enqueue (the caller gets the exception, nothing is written).
- :meth:`JobMiddleware.attempt` returns a context manager entered right before the job
  function is called and exited right after it returns or raises, sync or ``async def``,
  in a worker, in ``Worker(...).run()`` and in EAGER mode: the exception of a failed
  attempt reaches its ``__exit__`` (or the ``except`` around a ``@contextmanager``'s
  ``yield``) before the worker records it; a soft timeout arrives as
  :class:`~django_rqueue.exceptions.JobTimeout`.

Why a context manager and not ``__call__(job, call_next)``: one shape serves sync and
``async def`` jobs alike (a ``call_next`` would need a sync and an async variant, as
Django's async-capable middleware does), and it is the shape of what middleware opens
around a job: OpenTelemetry's ``tracer.start_as_current_span()`` and sentry-sdk's
``isolation_scope()`` are context managers. It cannot change the job's arguments or
result; it must not suppress the exception (return a true value from ``__exit__``): the
attempt then still counts as failed.

Order, as Django's ``MIDDLEWARE``: enqueue hooks run in list order; the attempt context
managers nest with the first of the list outermost (entered first, exited last).

A library's integration may also :func:`install` an instance from code (the Sentry
integration does, from ``sentry_sdk.init()``): installed instances run ahead of
``RQUEUE["MIDDLEWARE"]``'s, outermost, as Dramatiq's Sentry middleware goes first.
With no middleware configured, enqueues and attempts do no extra work (one empty-tuple
check each).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from django.core.checks import CheckMessage, Error
from django.utils.module_loading import import_string

from .conf import _reset, get_config
from .headers import encode

if TYPE_CHECKING:
    from .context import JobContext

#: The hook names a middleware class may define (checked by ``rqueue.E142``).
HOOKS = ("enqueue", "attempt")


@dataclasses.dataclass(slots=True)
class EnqueueCall:
    """One job about to be written, as :meth:`JobMiddleware.enqueue` sees it.

    ``args`` and ``kwargs`` are the job's arguments as the caller passed them (read them,
    do not change them: they are already encoded). ``headers`` starts empty; what the
    hooks leave in it is stored with the job (``str`` names and values, at most
    :data:`~django_rqueue.headers.MAX_HEADERS_BYTES` as JSON, else
    :class:`~django_rqueue.headers.InvalidHeaders` is raised to the caller).
    """

    #: The job function's registered name.
    name: str
    #: The queue it is written to.
    queue: str
    #: The job's id (``"<queue>:<id>"``), as :attr:`Job.id <django_rqueue.job.Job.id>`.
    job_id: str
    #: The positional arguments, as given.
    args: Sequence[Any]
    #: The keyword arguments, as given.
    kwargs: Mapping[str, Any]
    #: The headers the job is written with: add to them (text names and values).
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    #: The ``RQUEUE["SCHEDULE"]`` entry whose run this job is; ``None`` for any other job.
    entry: str | None = None


class JobMiddleware:
    """A base class for ``RQUEUE["MIDDLEWARE"]`` classes (optional: any class with one of
    the two methods will do). Override either or both; a hook left as it is here costs
    nothing (it is not called)."""

    def enqueue(self, call: EnqueueCall) -> None:
        """Called for every job before it is written; may add to ``call.headers``."""

    def attempt(self, context: JobContext) -> AbstractContextManager[object]:
        """A context manager around one attempt of ``context.job`` (attempt number
        ``context.attempt``, from 1), entered right before the function is called."""
        return contextlib.nullcontext()


@dataclasses.dataclass(frozen=True)
class Chain:
    """The hooks of the configured middleware, in ``RQUEUE["MIDDLEWARE"]`` order; a hook a
    class does not define (or inherits from :class:`JobMiddleware`) is left out."""

    enqueue: tuple[Callable[[EnqueueCall], None], ...] = ()
    attempt: tuple[Callable[[JobContext], AbstractContextManager[object]], ...] = ()


#: No middleware.
EMPTY = Chain()

#: The instances :func:`install` added in this process, in order.
_installed: tuple[object, ...] = ()


def install(instance: object) -> None:
    """Run ``instance``'s hooks in this process, for every job, ahead of (outside)
    ``RQUEUE["MIDDLEWARE"]``'s: for an integration set up from code rather than from
    settings (:class:`~django_rqueue.contrib.sentry.RqueueIntegration` installs itself
    from ``sentry_sdk.init()``). Installing an instance of a class already installed
    does nothing. Install before the worker forks (children inherit it).

    Raises:
        TypeError: ``instance`` is a class, or defines neither ``enqueue`` nor ``attempt``.
    """
    global _installed
    if isinstance(instance, type) or not any(
        callable(getattr(instance, hook, None)) for hook in HOOKS
    ):
        raise TypeError(
            f"middleware.install() needs an instance defining enqueue(call) or "
            f"attempt(context), not {instance!r}"
        )
    if any(type(present) is type(instance) for present in _installed):
        return
    _installed = (*_installed, instance)
    load.cache_clear()
    _reset(setting="RQUEUE")  # a new Config: the enqueue plans cached on the old are dropped


def chain() -> Chain:
    """The hooks of the installed middleware and of ``RQUEUE["MIDDLEWARE"]`` (read now; the
    instances are built once per process and per value of the setting).

    Raises:
        ImportError: a path does not import (``manage.py check`` reports it, E141).
    """
    return chain_of(get_config().middleware)


def chain_of(paths: tuple[str, ...]) -> Chain:
    """The hooks of the installed middleware, then of the classes at ``paths``."""
    return load(paths) if paths or _installed else EMPTY


@functools.cache
def load(paths: tuple[str, ...]) -> Chain:
    """Import the classes at ``paths``, build one instance of each, collect their hooks,
    after those of the instances given to :func:`install`."""
    enqueue: list[Callable[[EnqueueCall], None]] = []
    attempt: list[Callable[[JobContext], AbstractContextManager[object]]] = []
    for instance in (*_installed, *(import_string(path)() for path in paths)):
        hook = getattr(instance, "enqueue", None)
        if hook is not None and getattr(type(instance), "enqueue", None) is not (
            JobMiddleware.enqueue
        ):
            enqueue.append(hook)
        hook = getattr(instance, "attempt", None)
        if hook is not None and getattr(type(instance), "attempt", None) is not (
            JobMiddleware.attempt
        ):
            attempt.append(hook)
    return Chain(tuple(enqueue), tuple(attempt))


def enqueue_headers(
    hooks: tuple[Callable[[EnqueueCall], None], ...],
    name: str,
    queue: str,
    job_id: str,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    entry: str | None = None,
) -> str:
    """Run the enqueue ``hooks`` in order on one job; its headers as the record stores them
    (``""``: none).

    Raises:
        InvalidHeaders: the hooks left headers that are not ``str -> str`` or too large.
        Exception: what a hook raised (the job is not written).
    """
    call = EnqueueCall(name, queue, job_id, args, kwargs, {}, entry)
    for hook in hooks:
        hook(call)
    return encode(call.headers, name)


def wrapped(hooks: Chain, context: JobContext) -> contextlib.ExitStack:
    """The attempt hooks' context managers for ``context``, entered in order (the first
    outermost), in one ``ExitStack`` that exits them in reverse."""
    stack = contextlib.ExitStack()
    with stack:
        for hook in hooks.attempt:
            stack.enter_context(hook(context))
        return stack.pop_all()


def call[T](hooks: Chain, context: JobContext, function: Callable[[], T]) -> T:
    """``function()`` inside the attempt hooks' context managers (:func:`wrapped`);
    its exception reaches them, then the caller, even if one of them suppresses it."""
    raised: BaseException | None = None
    with wrapped(hooks, context):
        try:
            return function()
        except BaseException as exc:
            raised = exc
            raise
    raise _suppressed(raised)


async def acall[T](hooks: Chain, context: JobContext, function: Callable[[], Awaitable[T]]) -> T:
    """:func:`call` for a coroutine function: ``await function()`` inside the context
    managers (entered and exited on the event loop's thread)."""
    raised: BaseException | None = None
    with wrapped(hooks, context):
        try:
            return await function()
        except BaseException as exc:
            raised = exc
            raise
    raise _suppressed(raised)


def _suppressed(raised: BaseException | None) -> BaseException:
    """The exception a middleware suppressed (an attempt cannot succeed by it)."""
    if raised is None:  # pragma: no cover - the block either returned or raised
        return RuntimeError("a job middleware suppressed no exception")
    return raised


def check(paths: object) -> list[CheckMessage]:
    """The system check of ``RQUEUE["MIDDLEWARE"]``'s classes (its shape is E140's, in the
    settings' own check): E141 a path does not import; E142 what it names is not a class,
    or defines neither ``enqueue`` nor ``attempt`` as a method."""
    if not isinstance(paths, list | tuple) or not all(isinstance(p, str) for p in paths):
        return []  # E140
    found: list[CheckMessage] = []
    for path in paths:
        where = f"RQUEUE['MIDDLEWARE'] entry {path!r}"
        try:
            target = import_string(path)
        except ImportError as exc:
            found.append(Error(f"{where} does not import: {exc}", id="rqueue.E141"))
            continue
        if not isinstance(target, type):
            found.append(
                Error(f"{where} is not a class: it is a {type(target).__name__}.", id="rqueue.E142")
            )
        elif not any(callable(getattr(target, hook, None)) for hook in HOOKS):
            found.append(
                Error(
                    f"{where} defines neither enqueue(call) nor attempt(context).",
                    hint="Subclass django_rqueue.middleware.JobMiddleware and override one.",
                    id="rqueue.E142",
                )
            )
    return found
