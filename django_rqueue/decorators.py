"""``@job``: turn a function into a job that ``.delay()`` sends to a queue."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, overload

from django.db import transaction
from django.utils import timezone

from . import registry, signals
from .backoff import BackoffPolicy
from .conf import BACKOFF_NAMES, Config, get_config
from .engine import transitions
from .engine.connection import get_client, redis_errors
from .engine.keys import JobFields, QueueKeys, new_job_id
from .job import Job, JobStatus
from .serialization import encode_arguments

#: ``priority`` bounds, as in ``django.tasks``: higher runs first.
MIN_PRIORITY, MAX_PRIORITY = -100, 100
#: Longest accepted ``group`` / ``unique_key`` string.
MAX_NAME_LENGTH = 200

_UNSET: Any = object()


@dataclasses.dataclass(frozen=True)
class JobOptions:
    """Options of a ``@job`` or of one ``using()`` call; ``None`` = inherit.

    Resolution, first set wins: ``using()``, ``@job(...)``, the queue's entry
    in ``RQUEUE["QUEUES"]``, ``RQUEUE["DEFAULTS"]``, the built-in defaults.
    """

    queue: str | None = None
    priority: int | None = None
    #: Seconds.
    timeout: float | None = None
    max_attempts: int | None = None
    backoff: BackoffPolicy | None = None
    #: Seconds a finished job's record (and result) is kept.
    result_ttl: int | None = None
    #: A string, or a callable given the job's arguments that returns one.
    unique_key: str | Callable[..., str] | None = None
    #: Seconds after which a unique key is released even if its job is pending.
    unique_ttl: int | None = None
    group: str | None = None
    #: Seconds from now (Redis clock); a ``timedelta`` is converted to seconds.
    delay: float | datetime.timedelta | None = None
    run_at: datetime.datetime | None = None
    on_commit: bool | None = None

    def __post_init__(self) -> None:
        _validate(self)

    def merged(self, other: JobOptions) -> JobOptions:
        """Return these options with every field ``other`` sets overriding them."""
        changes = {
            f.name: getattr(other, f.name)
            for f in dataclasses.fields(other)
            if getattr(other, f.name) is not None
        }
        return dataclasses.replace(self, **changes)


def _number(name: str, value: object, *, minimum: float, integer: bool = False) -> None:
    kinds: tuple[type, ...] = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or value < minimum:  # type: ignore[operator]
        kind = "an integer" if integer else "a number"
        raise ValueError(f"{name} must be {kind} >= {minimum}, got {value!r}")


def _validate(o: JobOptions) -> None:  # noqa: C901 - one check per option
    if o.priority is not None:
        if isinstance(o.priority, bool) or not isinstance(o.priority, int):
            raise ValueError(f"priority must be an integer, got {o.priority!r}")
        if not MIN_PRIORITY <= o.priority <= MAX_PRIORITY:
            raise ValueError(f"priority must be between -100 and 100, got {o.priority}")
    if o.queue is not None and not isinstance(o.queue, str):
        raise ValueError(f"queue must be a str, got {o.queue!r}")
    if o.timeout is not None:
        _number("timeout", o.timeout, minimum=0.001)
    if o.max_attempts is not None:
        _number("max_attempts", o.max_attempts, minimum=1, integer=True)
    if o.result_ttl is not None:
        _number("result_ttl", o.result_ttl, minimum=0, integer=True)
    if o.unique_ttl is not None:
        _number("unique_ttl", o.unique_ttl, minimum=1, integer=True)
    if o.backoff is not None and not callable(o.backoff) and o.backoff not in BACKOFF_NAMES:
        raise ValueError(f"backoff must be 'exponential' or a callable, got {o.backoff!r}")
    for name in ("group", "unique_key"):
        value = getattr(o, name)
        if value is None or (name == "unique_key" and callable(value)):
            continue
        if not isinstance(value, str) or len(value) > MAX_NAME_LENGTH:
            raise ValueError(f"{name} must be a str of at most {MAX_NAME_LENGTH} characters")
    if o.delay is not None:
        if isinstance(o.delay, datetime.timedelta):
            object.__setattr__(o, "delay", o.delay.total_seconds())
        _number("delay", o.delay, minimum=0)
    if o.run_at is not None and not isinstance(o.run_at, datetime.datetime):
        raise ValueError(f"run_at must be a datetime, got {o.run_at!r}")
    if o.on_commit is not None and not isinstance(o.on_commit, bool):
        raise ValueError("on_commit must be True or False")


class JobFunction[**P, R]:
    """A function decorated with ``@job``.

    Calling it runs the function inline. :meth:`delay` enqueues it;
    :meth:`using` returns a copy bound to per-call options. Jobs are found by
    workers through :attr:`name` (``"<module>.<qualname>"`` unless given).
    """

    def __init__(self, func: Callable[P, R], name: str, options: JobOptions) -> None:
        self.func = func
        self.name = name
        self.options = options
        self.__doc__ = func.__doc__
        self.__wrapped__ = func

    def __repr__(self) -> str:
        return f"<JobFunction {self.name}>"

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.func(*args, **kwargs)

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
    ) -> JobFunction[P, R]:
        """Return a copy of this job bound to per-call options (validated now).

        ``delay`` is seconds (int/float) or a ``timedelta``; ``run_at`` an aware
        datetime (a naive one is read in Django's current time zone); when
        both are given ``run_at`` wins. Raises ``ValueError`` for a bad value.
        """
        extra = JobOptions(
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
        )
        return JobFunction(self.func, self.name, self.options.merged(extra))

    def delay(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        """Enqueue a run of this job with these arguments and return its :class:`Job`.

        Inside ``transaction.atomic()`` the job is written when the outermost
        transaction commits and not at all on rollback (unless
        ``using(on_commit=False)``); the returned Job already has its final id.
        With ``RQUEUE["EAGER"]`` the job runs inline before this returns.

        Raises:
            TypeError: an argument cannot be carried by JSON (nothing written).
            ValueError: the queue is not declared.
            RedisUnavailable: Redis cannot be reached (nothing written).
        """
        config = get_config()
        submit = _Plan.of(self, config).submit(args, kwargs)
        if config.eager:
            from .execution import run_eager

            return run_eager(self, submit.job)
        if self.options.on_commit is not False and transaction.get_connection().in_atomic_block:
            holder = submit.pending_holder()
            if holder is not None:
                return holder
            transaction.on_commit(submit)
            return submit.job
        return submit()

    def delay_many(
        self, calls: Iterable[tuple[Sequence[Any], Mapping[str, Any]]], *, batch_size: int = 500
    ) -> list[Job]:
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
            TypeError: a call is not an ``(args, kwargs)`` pair, or an argument
                cannot be carried by JSON; the message names the call's index
                (nothing written).
            ValueError: the queue is not declared.
            RedisUnavailable: Redis cannot be reached (batches already sent stay written).
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size!r}")
        config = get_config()
        plan = _Plan.of(self, config)
        submits: list[_Submit] = []
        for index, call in enumerate(calls):
            args, kwargs = _call_pair(index, call)
            try:
                submits.append(plan.submit(args, kwargs))
            except TypeError as exc:
                raise TypeError(f"call {index}: {exc}") from exc
        if config.eager:
            from .execution import run_eager

            return [run_eager(self, s.job) for s in submits]
        batch = _SubmitMany(self, submits, batch_size)
        if self.options.on_commit is not False and transaction.get_connection().in_atomic_block:
            batch.resolve_pending()
            if batch.to_write:
                transaction.on_commit(batch)
            return batch.jobs
        return batch()


@dataclasses.dataclass(frozen=True, slots=True)
class _Plan:
    """What every call of one ``.delay()`` / ``.delay_many()`` shares, resolved once."""

    job_function: JobFunction[Any, Any]
    queue: str
    priority: int
    group: str
    max_attempts: int
    #: Seconds.
    timeout: float
    result_ttl: int
    unique_key: str | Callable[..., str] | None
    unique_ttl: int
    status: JobStatus
    run_at: datetime.datetime | None
    #: Milliseconds since the epoch (UTC), or -1.
    run_at_ms: int
    delay_ms: int

    @classmethod
    def of(cls, job_function: JobFunction[Any, Any], config: Config) -> _Plan:
        """Resolve the options of ``job_function`` (``ValueError``: its queue is undeclared)."""
        o = job_function.options
        queue = o.queue or config.default_queue
        qconf = config.queue(queue)
        status = JobStatus.QUEUED
        run_at, run_at_ms = o.run_at, -1
        if run_at is not None:
            if timezone.is_naive(run_at):
                run_at = timezone.make_aware(run_at)
            run_at_ms = int(run_at.timestamp() * 1000)
            status = JobStatus.SCHEDULED
        delay = o.delay.total_seconds() if isinstance(o.delay, datetime.timedelta) else o.delay
        delay_ms = int((delay or 0) * 1000)
        if delay_ms > 0:
            status = JobStatus.SCHEDULED
        return cls(
            job_function=job_function,
            queue=queue,
            priority=o.priority or 0,
            group=o.group or "",
            max_attempts=o.max_attempts or qconf.max_attempts,
            timeout=o.timeout or qconf.timeout,
            result_ttl=o.result_ttl if o.result_ttl is not None else qconf.result_ttl,
            unique_key=o.unique_key,
            unique_ttl=o.unique_ttl or 0,
            status=status,
            run_at=run_at,
            run_at_ms=run_at_ms,
            delay_ms=delay_ms,
        )

    def submit(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> _Submit:
        """Validate and encode one call; the returned submit writes it (raises ``TypeError``)."""
        payload = encode_arguments(args, kwargs, self.job_function.func)
        unique_key = self.unique_key
        if callable(unique_key):
            unique_key = unique_key(*args, **kwargs)
        job = Job(
            id=new_job_id(self.queue),
            name=self.job_function.name,
            queue=self.queue,
            status=self.status,
            args=list(args),
            kwargs=dict(kwargs),
            priority=self.priority,
            group=self.group,
            max_attempts=self.max_attempts,
            timeout=self.timeout,
            result_ttl=self.result_ttl,
            unique_key=unique_key or "",
            run_at=self.run_at,
        )
        return _Submit(
            self.job_function, job, payload, self.delay_ms, self.run_at_ms, self.unique_ttl
        )


def _call_pair(index: int, call: object) -> tuple[Sequence[Any], Mapping[str, Any]]:
    """Check that ``call`` is an ``(args, kwargs)`` pair (``TypeError`` naming ``index``)."""
    if isinstance(call, tuple | list) and len(call) == 2:
        args, kwargs = call
        plain = type(args) in (tuple, list) and type(kwargs) is dict
        if plain and all(type(k) is str for k in kwargs):
            return args, kwargs  # the common case, without the ABC checks below
        if (
            isinstance(args, Sequence)
            and not isinstance(args, str | bytes)
            and isinstance(kwargs, Mapping)
            and all(isinstance(k, str) for k in kwargs)
        ):
            return args, kwargs
    raise TypeError(
        f"call {index}: expected an (args, kwargs) pair such as ((1, 2), {{}}), got {call!r:.80}"
    )


@dataclasses.dataclass
class _Submit:
    """Writes one job to Redis, now or from ``transaction.on_commit``."""

    job_function: JobFunction[Any, Any]
    job: Job
    payload: str
    delay_ms: int
    run_at_ms: int
    unique_ttl: int

    def _keys(self) -> QueueKeys:
        return QueueKeys.of(get_config().key_prefix, self.job.queue)

    def pending_holder(self) -> Job | None:
        """The pending job already holding this job's unique key, if any."""
        if not self.job.unique_key:
            return None
        client = get_client(self.job.queue)
        with redis_errors():
            holder = client.get(self._keys().unique(self.job.unique_key))
        if holder is not None:
            from .job import get_job

            existing = get_job(holder.decode() if isinstance(holder, bytes) else str(holder))
            if existing and existing.status in (
                JobStatus.SCHEDULED,
                JobStatus.QUEUED,
                JobStatus.RUNNING,
            ):
                return existing
        # A job with this key already waiting for this same transaction's commit.
        for entry in transaction.get_connection().run_on_commit:
            callback = entry[1]
            waiting = callback.to_write if isinstance(callback, _SubmitMany) else [callback]
            for other in waiting:
                if isinstance(other, _Submit) and (other.job.queue, other.job.unique_key) == (
                    self.job.queue,
                    self.job.unique_key,
                ):
                    return other.job
        return None

    def __call__(self) -> Job:
        job = self.job
        outcome, job_id, state = transitions.enqueue(
            get_client(job.queue),
            self._keys(),
            job_id=job.id,
            priority=job.priority,
            group=job.group,
            delay_ms=self.delay_ms,
            run_at_ms=self.run_at_ms,
            unique_key=job.unique_key,
            unique_ttl=self.unique_ttl,
            fields=self.fields(),
        )
        if outcome == "duplicate":
            from .job import get_job

            existing = get_job(job_id)
            if existing is not None:
                # In place: a Job returned earlier (before commit) now names the holder.
                job.__dict__.update(existing.__dict__)
                return job
        job.status = JobStatus(state)
        if outcome == "created":
            signals.send(signals.job_enqueued, self.job_function, job=job)
        return job

    def fields(self) -> dict[str, str | int]:
        job = self.job
        return {
            JobFields.NAME: job.name,
            JobFields.PAYLOAD: self.payload,
            JobFields.MAX_ATTEMPTS: job.max_attempts,
            JobFields.TIMEOUT_MS: int(job.timeout * 1000),
            JobFields.RESULT_TTL: job.result_ttl,
        }


class _SubmitMany:
    """Writes the jobs of one :meth:`JobFunction.delay_many` call, now or on commit.

    ``jobs`` are the Jobs returned to the caller, in call order; a call whose
    unique key an earlier call of the batch (or, after :meth:`resolve_pending`,
    a pending job) holds shares that Job. ``to_write`` are the submits still
    to be written.
    """

    def __init__(
        self, job_function: JobFunction[Any, Any], submits: list[_Submit], batch_size: int
    ) -> None:
        self.job_function = job_function
        self.batch_size = batch_size
        self.jobs: list[Job] = []
        self.to_write: list[_Submit] = []
        first: dict[str, Job] = {}
        for submit in submits:
            key = submit.job.unique_key
            if key and key in first:
                self.jobs.append(first[key])
                continue
            if key:
                first[key] = submit.job
            self.jobs.append(submit.job)
            self.to_write.append(submit)

    def resolve_pending(self) -> None:
        """Inside a transaction: calls whose unique key a pending job holds get that job."""
        keep: list[_Submit] = []
        for submit in self.to_write:
            holder = submit.pending_holder() if submit.job.unique_key else None
            if holder is None:
                keep.append(submit)
            else:
                self.jobs = [holder if j is submit.job else j for j in self.jobs]
        self.to_write = keep

    def __call__(self) -> list[Job]:
        if not self.to_write:
            return self.jobs
        first = self.to_write[0]
        fields = first.fields()
        del fields[JobFields.PAYLOAD]  # every other field is the same for the whole batch
        replies = transitions.enqueue_batch(
            get_client(first.job.queue),
            first._keys(),
            [transitions.BatchItem(s.job.id, s.job.unique_key, s.payload) for s in self.to_write],
            priority=first.job.priority,
            group=first.job.group,
            delay_ms=first.delay_ms,
            run_at_ms=first.run_at_ms,
            unique_ttl=first.unique_ttl,
            fields=fields,
            batch_size=self.batch_size,
        )
        from .job import get_job

        announce = signals.job_enqueued.has_listeners(self.job_function)
        statuses = {status.value: status for status in JobStatus}
        for submit, (outcome, job_id, state) in zip(self.to_write, replies, strict=True):
            job = submit.job
            if outcome == "duplicate":
                existing = get_job(job_id)
                if existing is not None:
                    job.__dict__.update(existing.__dict__)
                    continue
            job.status = statuses[state]
            if outcome == "created" and announce:
                signals.send(signals.job_enqueued, self.job_function, job=job)
        return self.jobs


@overload
def job[**P, R](func: Callable[P, R], /) -> JobFunction[P, R]: ...


@overload
def job[**P, R](
    *,
    name: str | None = None,
    queue: str | None = None,
    priority: int = 0,
    timeout: float | None = None,
    max_attempts: int | None = None,
    backoff: BackoffPolicy | None = None,
    result_ttl: int | None = None,
    unique_key: str | Callable[..., str] | None = None,
    unique_ttl: int | None = None,
) -> Callable[[Callable[P, R]], JobFunction[P, R]]: ...


def job[**P, R](
    func: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    queue: str | None = None,
    priority: int = 0,
    timeout: float | None = None,
    max_attempts: int | None = None,
    backoff: BackoffPolicy | None = None,
    result_ttl: int | None = None,
    unique_key: str | Callable[..., str] | None = None,
    unique_ttl: int | None = None,
) -> JobFunction[P, R] | Callable[[Callable[P, R]], JobFunction[P, R]]:
    """Decorate a function as a job, bare (``@job``) or with options (``@job(queue=...)``).

    ``priority`` is -100..100 (higher first, default 0); ``timeout`` and
    ``unique_ttl`` are seconds; ``backoff`` is ``"exponential"`` or a
    callable ``(attempt, exception) -> seconds | None``; ``unique_key`` a
    string or a callable of the job's arguments. Whether ``queue`` is
    declared is checked at ``.delay()``, when settings are read.

    Raises:
        ValueError: an option is out of range or of the wrong type.
    """
    options = JobOptions(
        queue=queue,
        priority=priority,
        timeout=timeout,
        max_attempts=max_attempts,
        backoff=backoff,
        result_ttl=result_ttl,
        unique_key=unique_key,
        unique_ttl=unique_ttl,
    )

    def decorate(f: Callable[P, R]) -> JobFunction[P, R]:
        if not callable(f):
            raise TypeError(f"@job decorates a function, not {type(f).__name__}")
        job_function = JobFunction(f, name or f"{f.__module__}.{f.__qualname__}", options)
        registry.register(job_function)
        return job_function

    if func is not None:
        return decorate(func)
    return decorate
