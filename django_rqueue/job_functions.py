"""The job-function classes: what ``@job`` returns. ``.delay()``, ``.adelay()``,
``.delay_many()``, ``.using()``, ``.s()``/``.si()``, and how a worker calls the function with
a job's arguments (and, for a job that waited, its inputs' value in front)."""

from __future__ import annotations

import copy
import datetime
import functools
import inspect
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any, Self

from . import enqueue
from .argument_check import ArgumentCheck
from .conf import Config
from .context import JobContext
from .inputs import prepend
from .job import Job
from .options import (
    DependencyPolicy,
    JobOptions,
    NoTimeout,
    using_options,
)
from .sensitive import Sensitive
from .workflows.signature import Signature


class BaseJobFunction[**P, R]:
    """What every function decorated with ``@job`` has: ``P`` are the parameters
    ``.delay()`` takes, ``R`` what a run returns (awaited, for an ``async def``).

    :meth:`delay` enqueues it; :meth:`using` returns a copy bound to per-call
    options. Jobs are found by workers through :attr:`name` (``"<module>.<qualname>"``
    unless given). ``takes_context``: the function is given a
    :class:`~django_rqueue.context.JobContext` first when it runs as a job. Calling it
    runs the function inline; how it is called differs by kind, so each of the four
    subclasses (:class:`JobFunction`, :class:`ContextJobFunction`,
    :class:`AsyncJobFunction`, :class:`AsyncContextJobFunction`) defines ``__call__``.
    """

    takes_context = False
    #: The enqueue plan last resolved for this function: ``(config, options, plan)``
    #: (``django_rqueue.enqueue.Plan.of``), reused while both are the same objects.
    _plan_cache: tuple[Config, JobOptions, enqueue.Plan] | None = None
    #: The arguments hidden from people (``@job(sensitive=...)``); ``None``: none.
    sensitive: Sensitive | None = None
    #: The decorated function (each subclass says what it returns).
    func: Callable[..., Any]
    #: Whether :meth:`using` set an option of dependencies (``depends_on``,
    #: ``on_dependency_failure``, ``pass_results``, ``dependency_timeout``): one attribute
    #: that a plain ``.delay()`` reads, instead of four.
    _waits = False

    def __init__(self, func: Callable[..., Any], name: str, options: JobOptions) -> None:
        self.func = func
        #: The job's name, by which workers find it (``"<module>.<qualname>"`` unless given).
        self.name = name
        #: The options of ``@job`` (and of :meth:`using`, on a copy).
        self.options = options
        self.__doc__ = func.__doc__
        self.__wrapped__ = func

    def __repr__(self) -> str:
        return f"<JobFunction {self.name}>"

    def arguments(self, job: Job[Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The positional and keyword arguments to call :attr:`func` with for ``job``'s
        attempt: a job that waited for inputs with a pass shape (``.s()`` in a workflow,
        ``pass_results=True``) gets their values first (:func:`~.inputs.prepend`), then its
        own arguments.

        Raises:
            ValueError: an input's value does not decode (corrupt, or a key is missing).
        """
        return (*_prepended(job), *job.args), job.kwargs

    @functools.cached_property
    def signature_check(self) -> ArgumentCheck | None:
        """How :meth:`check_arguments` checks a call, made from :attr:`func`'s signature on
        first use (``None`` when the signature cannot be read: nothing is checked)."""
        return ArgumentCheck.of(self.func, skip=int(self.takes_context))

    def check_arguments(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
        """Check that :attr:`func` accepts ``args`` and ``kwargs`` (the context of a
        ``takes_context`` job left out).

        Raises:
            TypeError: a required argument is missing, or one is unexpected; the
                message names the job, its parameters and the problem.
        """
        check = self.signature_check
        if check is not None:
            check(self.name, args, kwargs)

    @functools.cached_property
    def is_async(self) -> bool:
        """Whether :attr:`func` is an ``async def`` function: workers run its attempts on an
        event loop, up to ``--async-concurrency`` at once per child."""
        return inspect.iscoroutinefunction(self.func)

    def using(
        self,
        *,
        delay: float | datetime.timedelta | None = None,
        run_at: datetime.datetime | None = None,
        group: str | None = None,
        priority: int | None = None,
        queue: str | None = None,
        unique_key: str | None = None,
        unique_ttl: int | None = None,
        timeout: float | None = None,
        max_attempts: int | None = None,
        result_ttl: int | None = None,
        on_commit: bool | None = None,
        expires: float | datetime.timedelta | datetime.datetime | None = None,
        job_id: str | None = None,
        depends_on: Iterable[Job[Any] | str] | None = None,
        on_dependency_failure: DependencyPolicy | None = None,
        pass_results: bool | None = None,
        dependency_timeout: float | datetime.timedelta | NoTimeout | None = None,
    ) -> Self:
        """Return a copy of this job bound to per-call options (validated now).

        ``delay`` is seconds (int/float) or a ``timedelta``; ``run_at`` an aware
        datetime (a naive one is read in Django's current time zone); when
        both are given ``run_at`` wins. ``expires``: a job no worker has started
        by then is never run (it ends ``cancelled``, :attr:`Job.cancel_reason`
        ``"expired"``); seconds or a ``timedelta`` counted from the enqueue (Redis
        clock), or an aware datetime. ``job_id`` (1 to 128 of ``A-Z a-z 0-9 _ . - :``)
        names the job ``"<queue>:<job_id>"`` instead of a random id: enqueueing it
        again while its record exists (any state, until its ``result_ttl`` ends)
        returns that job and writes nothing, so a retried request cannot enqueue
        twice (Celery's ``task_id``, RQ's ``job_id``); not with ``delay_many``.

        Dependencies (``django_rqueue.workflows``): ``depends_on``, a list of
        :class:`Job` objects or job ids, makes the job wait (``JobStatus.WAITING``) until
        each of them has ended, after its last attempt; ``on_dependency_failure``:
        ``"cancel"`` (the default: when one of them did not succeed the job ends
        ``cancelled`` with reason ``dependency_failed``) or ``"run"`` (it runs, a
        ``DependencyFailed`` in place of that input); ``pass_results=True``: the list of
        their results is prepended to its arguments (default: not; the context's
        ``inputs`` have them); ``dependency_timeout``: seconds, a ``timedelta`` or
        ``NO_TIMEOUT``, how long it waits at most, from its enqueue (default
        ``RQUEUE["WORKFLOW_DEPENDENCY_TIMEOUT"]``). The last three also apply to a
        signature in a workflow (``.s()``). Not with ``delay_many``.

        Raises ``ValueError`` for a bad value (a naive ``expires`` datetime, a
        number or ``timedelta`` <= 0 included), ``TypeError`` when ``depends_on``
        is a single job or id instead of a list.
        """
        extra = using_options(
            delay=delay,
            run_at=run_at,
            group=group,
            priority=priority,
            queue=queue,
            unique_key=unique_key,
            unique_ttl=unique_ttl,
            timeout=timeout,
            max_attempts=max_attempts,
            result_ttl=result_ttl,
            on_commit=on_commit,
            expires=expires,
            job_id=job_id,
            depends_on=depends_on,
            on_dependency_failure=on_dependency_failure,
            pass_results=pass_results,
            dependency_timeout=dependency_timeout,
        )
        bound = copy.copy(self)
        bound.options = options = self.options.merged(extra)
        bound._waits = (
            options.depends_on is not None
            or options.on_dependency_failure is not None
            or options.pass_results is not None
            or options.dependency_timeout is not None
        )
        return bound

    def s(self, *args: Any, **kwargs: Any) -> Signature:
        """A signature of a call of this job, for a workflow (``chain``, ``group``, ``chord``
        of :mod:`django_rqueue.workflows`), with this job function's options.

        After another element of a workflow it gets that element's result first, before
        ``args`` (a group's: the list of its members' results): ``parse.s()`` after
        ``fetch.s(url)`` runs ``parse(<fetch's result>)``. Use :meth:`si` to pass nothing.

        Raises:
            TypeError: ``args`` and ``kwargs`` fit the function's signature neither as they
                are nor after one prepended result (when the workflow is compiled, they are
                checked exactly, knowing whether a result is prepended).
        """
        return Signature.of(self, args, kwargs, immutable=False)

    def si(self, *args: P.args, **kwargs: P.kwargs) -> Signature:
        """An immutable signature (see :meth:`s`): it runs with ``args`` and ``kwargs`` only,
        whatever comes before it in a workflow (its inputs' outcomes stay readable from the
        context's ``inputs``).

        Raises:
            TypeError: ``args`` and ``kwargs`` do not fit the function's signature.
        """
        return Signature.of(self, args, kwargs, immutable=True)

    def delay(self, *args: P.args, **kwargs: P.kwargs) -> Job[R]:
        """Enqueue a run of this job with these arguments and return its :class:`Job`.

        Inside ``transaction.atomic()`` the job is written when the outermost
        transaction commits and not at all on rollback (unless
        ``using(on_commit=False)``); the returned Job already has its final id.
        With ``RQUEUE["EAGER"]`` the job runs inline before this returns.

        Raises:
            TypeError: the arguments do not fit the function's signature (a missing,
                extra or unknown argument; the context of a ``takes_context`` job
                is left out), or one cannot be carried by JSON (nothing written).
            ValueError: the queue is not declared.
            RedisUnavailable: Redis cannot be reached (nothing written); its subclass
                RedisAuthenticationFailed when Redis refuses the user/password.
            NotReplicated: with ``RQUEUE["MIN_REPLICAS_ACK"]``, fewer replicas
                confirmed the job within ``MIN_REPLICAS_TIMEOUT`` seconds; it
                was written to the master (inside ``transaction.atomic()``:
                raised by the commit, after it).

        With ``using(depends_on=...)`` the job waits (``JobStatus.WAITING``) for those
        jobs (:mod:`django_rqueue.enqueue.dependent`), and also raises ``JobStateError``
        when one of them does not exist (nothing is left written), ``ValueError`` with a
        ``unique_key`` or a ``job_id``, and ``WorkflowNotCreated`` (a
        ``RedisUnavailable``) when Redis could not be reached for ``ENQUEUE_PATIENCE``.
        """
        if self._waits:
            self._check_dependencies()
            return enqueue.submit_dependent(self, args, kwargs)
        return enqueue.submit(self, args, kwargs)

    def _check_dependencies(self) -> None:
        """A ``.delay()`` / ``.adelay()`` with options of dependencies: ``ValueError`` for
        ``on_dependency_failure``, ``pass_results`` or ``dependency_timeout`` without
        ``depends_on``."""
        if self.options.depends_on is None:
            raise ValueError(
                "on_dependency_failure, pass_results and dependency_timeout apply to a job "
                "with using(depends_on=...) or to a signature in a workflow (.s())"
            )

    async def adelay(self, *args: P.args, **kwargs: P.kwargs) -> Job[R]:
        """:meth:`delay` for async code (an async view, an async job): the write goes
        through redis-py's asyncio client, so the event loop is not blocked.

        From a coroutine the job is written at once: Django's transactions
        belong to a thread and async code cannot open one (call ``.delay()``
        inside the sync function you run with ``sync_to_async`` to enqueue on
        its commit). With ``RQUEUE["EAGER"]`` the job runs before this returns,
        on this event loop when it is an ``async def`` job.

        Raises what :meth:`delay` raises.
        """
        if self._waits:
            self._check_dependencies()
            return await enqueue.asubmit_dependent(self, args, kwargs)
        return await enqueue.asubmit(self, args, kwargs)

    def delay_many(
        self, calls: Iterable[tuple[Sequence[Any], Mapping[str, Any]]], *, batch_size: int = 500
    ) -> list[Job[R]]:
        """Enqueue one run per ``(args, kwargs)`` pair of ``calls``; return their Jobs in order.

        Every call is validated and encoded before anything is written; jobs
        are then written in pipelines of ``batch_size`` (one round trip each).
        ``using()`` options apply to every call. Inside ``transaction.atomic()``
        the whole batch is written by one ``on_commit`` callback (unless
        ``using(on_commit=False)``). A call whose unique key is held by a
        pending job (or by an earlier call of the batch) gets the holder's Job.
        With ``RQUEUE["EAGER"]`` each call runs inline, in order.
        ``job_enqueued`` is sent once per created job.

        Raises:
            TypeError: a call is not an ``(args, kwargs)`` pair, its arguments do
                not fit the function's signature, or one cannot be carried by
                JSON; the message names the call's index
                (nothing written).
            ValueError: the queue is not declared.
            EnqueueIncomplete: Redis could not be reached, or (Redis Cluster) the
                queue's slot kept moving, for longer than the batches not yet written
                are sent again (``django_rqueue.enqueue.write.ENQUEUE_PATIENCE``, 5 s); a
                ``RedisUnavailable`` whose ``written``, ``not_written`` and
                ``unknown`` list the Jobs by what Redis holds (a batch resent after a
                lost reply is not written twice).
            NotReplicated: with ``RQUEUE["MIN_REPLICAS_ACK"]`` (batches are then
                written one at a time, each followed by a ``WAIT``), a batch was
                not confirmed in time: its jobs were written to the master and
                are named by ``job_ids``; earlier batches were confirmed, later
                ones not written.
            ValueError: with ``using(depends_on=...)`` (or another option of dependencies),
                which ``delay_many`` does not take (nothing written).
        """
        if self._waits:
            raise ValueError(
                "delay_many does not take using(depends_on=...) or the other options of "
                "dependencies: enqueue each job with .delay(), or make a workflow "
                "(django_rqueue.workflows.group)"
            )
        return enqueue.submit_many(self, calls, batch_size)


def _prepended(job: Job[Any]) -> tuple[Any, ...]:
    """``(the value prepended from job's inputs,)``, or ``()`` when nothing is (a plain job,
    ``.si()``, ``pass_results=False``)."""
    inputs = job.inputs
    if inputs is None or inputs.pass_shape is None:
        return ()
    return (prepend(inputs.pass_shape, inputs.values()),)


class JobFunction[**P, R](BaseJobFunction[P, R]):
    """A function decorated with ``@job``: calling it runs the function inline."""

    func: Callable[..., R]

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.func(*args, **kwargs)


class _TakesContext[**P, R](BaseJobFunction[P, R]):
    """A ``@job(takes_context=True)`` function, sync or async: a fresh :class:`JobContext`
    comes first when it runs as a job."""

    takes_context = True

    def arguments(self, job: Job[Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """A fresh :class:`JobContext` (``attempt`` = ``job.attempts``, which already
        counts this attempt), then its inputs' values when it waited for inputs with a pass
        shape (as :meth:`BaseJobFunction.arguments`), then the job's own arguments."""
        context = JobContext(job=job, attempt=job.attempts)
        return (context, *_prepended(job), *job.args), job.kwargs


class ContextJobFunction[**P, R](_TakesContext[P, R]):
    """A ``@job(takes_context=True)`` function: ``P`` are its parameters after the context.

    ``.delay()`` takes the arguments that follow the context (the context is
    not stored); a worker or EAGER passes a fresh :class:`JobContext` first.
    Calling it directly runs the function inline with the arguments as given,
    context included.
    """

    func: Callable[..., R]

    def __call__(self, context: JobContext, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.func(context, *args, **kwargs)


class AsyncJobFunction[**P, R](BaseJobFunction[P, R]):
    """A ``@job`` on an ``async def`` function returning ``R``: its jobs are ``Job[R]``, and
    calling it returns the coroutine (run inline when awaited).

    Only the static types differ from :class:`JobFunction` (``is_async`` is what
    workers look at).
    """

    func: Callable[..., Coroutine[Any, Any, R]]

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, R]:
        return self.func(*args, **kwargs)


class AsyncContextJobFunction[**P, R](_TakesContext[P, R]):
    """A ``@job(takes_context=True)`` on an ``async def`` (see :class:`AsyncJobFunction`)."""

    func: Callable[..., Coroutine[Any, Any, R]]

    def __call__(
        self, context: JobContext, /, *args: P.args, **kwargs: P.kwargs
    ) -> Coroutine[Any, Any, R]:
        return self.func(context, *args, **kwargs)


# The async overload comes first and overlaps the sync one (an ``async def`` is a
# ``Callable[P, R]`` too) with an unrelated return type: mypy's overload-overlap is
# silenced there on purpose, since the first match wins.
