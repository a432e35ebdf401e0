"""The enqueue path: from ``.delay()`` / ``.delay_many()`` to a job in Redis.

:func:`submit` and :func:`submit_many` resolve a job function's options once
per call (:class:`Plan`), validate and encode every call's arguments before
anything is written, and then either run the jobs inline (``RQUEUE["EAGER"]``),
write them now, or, inside ``transaction.atomic()``, hand them to
``transaction.on_commit`` so that they are written when the outermost
transaction commits and not at all on a rollback.

:func:`asubmit` is the path of ``adelay()``, for async code: the same
validation, then the write on redis-py's asyncio client. Whether the call
waits for a commit is asked in ``sync_to_async``'s thread, where the caller's
transaction (if any) lives: Django's transactions are per thread and async
code cannot open one, so from a plain coroutine it writes at once.

Durable enqueue: with ``RQUEUE["MIN_REPLICAS_ACK"]`` > 0 every write is
followed by a ``WAIT`` on its connection, in one round trip (one per batch
for ``delay_many``, which then writes one batch at a time), and a job that
fewer replicas confirmed within ``MIN_REPLICAS_TIMEOUT`` raises
:class:`~.exceptions.NotReplicated` once it is announced (it was written to
the master). On commit it is raised from the ``on_commit`` callback, as
:class:`~.exceptions.RedisUnavailable` is.

Unique keys inside a transaction: a call whose ``unique_key`` is held by a
job that waits for the same commit gets that job. The package keeps its own
record of the submissions waiting for commit (:class:`_Pending`), one per
database connection, holding each submission *weakly*: Django holds the
on-commit callback, so a submission stays visible exactly as long as Django
would still run it. A rollback (of the transaction or of the savepoint it
was made in) makes Django drop the callback, and with it the submission;
Django's own list of callbacks is never read.
"""

from __future__ import annotations

import contextvars
import dataclasses
import datetime
import functools
import math
import time
import types
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import redis
from asgiref.sync import sync_to_async
from django.db import transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils import timezone
from redis.backoff import EqualJitterBackoff

from . import signals
from .conf import Config, get_config
from .encryption import seal
from .engine import calls, transitions
from .engine.calls import NewJob, ScriptCall
from .engine.connection import (
    as_text,
    get_async_client,
    get_client,
    ms_to_datetime,
    redis_errors,
)
from .engine.keys import RECORD_DEFAULTS, JobFields, QueueKeys, new_job_id
from .engine.transitions import EnqueueOutcome, ReplicaWait
from .exceptions import (
    EnqueueIncomplete,
    NotReplicated,
    RedisAuthenticationFailed,
    RedisUnavailable,
)
from .execution import arun_eager, run_eager
from .job import STATUSES, Job, JobStatus, aget_job, get_job
from .options import JobOptions
from .serialization import MAX_JSON_BYTES, encode_arguments

if TYPE_CHECKING:
    from .types import JobSpec

#: Seconds ``delay_many`` keeps sending the batches it could not write through a transient
#: failure (Redis unreachable for a moment, a Redis Cluster slot moving) before it raises
#: :class:`~.exceptions.EnqueueIncomplete`: what a web request can wait, and the time a
#: slot of a few hundred thousand keys takes to move with ``redis-cli --cluster reshard``'s
#: defaults (10 keys per ``MIGRATE``) on a local network (20 000 keys moved in 0.3 s on the
#: test host).
ENQUEUE_PATIENCE = 5.0
#: Longest pause in seconds between two of those tries (redis-py's ``EqualJitterBackoff``:
#: the n-th pause is uniform in [d/2, d], d = min(this, this / 8 * 2**n)).
ENQUEUE_RETRY = 1.0

#: No extra job-hash fields (the default of :attr:`Submission.extra`).
_NO_FIELDS: Mapping[str, str] = types.MappingProxyType({})

#: States in which a job holds its unique key.
HOLDING = (JobStatus.SCHEDULED, JobStatus.QUEUED, JobStatus.RUNNING)

#: Set by ``django_rqueue.testing.capture_jobs()``: while set (in this context), every
#: validated submission is handed to it instead of being written or run.
capture: contextvars.ContextVar[Callable[[Submission], Job[Any]] | None] = contextvars.ContextVar(
    "django_rqueue_capture", default=None
)


def submit(
    job_function: JobSpec,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    options: JobOptions | None = None,
    fields: Mapping[str, str] | None = None,
) -> Job[Any]:
    """Enqueue one call of ``job_function`` (see :meth:`JobFunction.delay`).

    ``options``: this call's options instead of ``job_function.options`` for
    its :class:`Plan` (the ``django.tasks`` backend passes a task's queue,
    priority and run-after this way, so that the job function, the signals'
    sender, stays one object); whether the write waits for a commit still
    follows ``job_function.options.on_commit``. ``fields``: extra job-hash
    fields written with the job.
    """
    submission, captured = _prepare(job_function, args, kwargs, options, fields)
    if captured is not None:
        return captured
    if get_config().eager:
        return run_eager(job_function, submission.job)
    deferred = _defer_until_commit(submission)
    return submission() if deferred is None else deferred


async def asubmit(
    job_function: JobSpec, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> Job[Any]:
    """:func:`submit` for async code (see :meth:`JobFunction.adelay`)."""
    submission, captured = _prepare(job_function, args, kwargs)
    if captured is not None:
        return captured
    if get_config().eager:
        return await arun_eager(job_function, submission.job)
    if job_function.options.on_commit is not False:
        deferred = await sync_to_async(_defer_until_commit)(submission)
        if deferred is not None:
            return deferred
    return await submission.awrite()


def _prepare(
    job_function: JobSpec,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    options: JobOptions | None = None,
    fields: Mapping[str, str] | None = None,
) -> tuple[Submission, Job[Any] | None]:
    """Validate and encode one call; with it, the Job ``capture_jobs()`` made of it (if on).

    ``options`` and ``fields``: as for :func:`submit`.
    """
    submission = Plan.of(job_function, get_config(), options).submission(args, kwargs)
    if fields:
        submission.extra = fields
    captured = capture.get()
    return submission, None if captured is None else captured(submission)


def _defer_until_commit(submission: Submission) -> Job[Any] | None:
    """Inside ``transaction.atomic()``: defer the write to the commit and return the Job (or
    the pending holder of its unique key). Outside (or ``on_commit=False``): ``None``."""
    if not _deferred(submission.plan.job_function):
        return None
    holder = submission.pending_holder()
    if holder is not None:
        return holder
    _defer(submission, [submission])
    return submission.job


def submit_many(
    job_function: JobSpec,
    calls: Iterable[tuple[Sequence[Any], Mapping[str, Any]]],
    batch_size: int,
) -> list[Job[Any]]:
    """Enqueue one run per ``(args, kwargs)`` pair (see :meth:`JobFunction.delay_many`)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size!r}")
    config = get_config()
    plan = Plan.of(job_function, config)
    if plan.job_id is not None:
        raise ValueError(
            "using(job_id=...) names one job: enqueue it with .delay(), not delay_many"
        )
    submissions: list[Submission] = []
    for index, call in enumerate(calls):
        args, kwargs = call_pair(index, call)
        try:
            submissions.append(plan.submission(args, kwargs))
        except TypeError as exc:
            raise TypeError(f"call {index}: {exc}") from exc
        except ValueError as exc:
            raise ValueError(f"call {index}: {exc}") from exc
    captured = capture.get()
    if captured is not None:
        return [captured(s) for s in submissions]
    if config.eager:
        return [run_eager(job_function, s.job) for s in submissions]
    batch = BatchSubmission(job_function, submissions, batch_size)
    if _deferred(job_function):
        batch.resolve_pending()
        if batch.to_write:
            _defer(batch, batch.to_write)
        return batch.jobs
    return batch()


def _deferred(job_function: JobSpec) -> bool:
    """Whether this call waits for the current transaction's commit."""
    return (
        job_function.options.on_commit is not False and transaction.get_connection().in_atomic_block
    )


def replica_wait(config: Config) -> ReplicaWait | None:
    """The ``WAIT`` every enqueue sends (``RQUEUE["MIN_REPLICAS_ACK"]``), or ``None`` when off."""
    if config.min_replicas_ack <= 0:
        return None
    return ReplicaWait(config.min_replicas_ack, max(1, round(config.min_replicas_timeout * 1000)))


def _check_replicated(wait: ReplicaWait, job_ids: Sequence[str], acked: int) -> None:
    """Raise :class:`NotReplicated` for ``job_ids`` (jobs this call wrote) unless
    ``wait.replicas`` replicas confirmed them."""
    if job_ids and acked < wait.replicas:
        raise NotReplicated(job_ids, acked, wait.replicas, wait.timeout_ms / 1000)


#: Outcomes of a job this very call wrote (``exists``: its reply was lost and it was resent).
WROTE = frozenset({EnqueueOutcome.CREATED, EnqueueOutcome.EXISTS})


def call_pair(index: int, call: object) -> tuple[Sequence[Any], Mapping[str, Any]]:
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


@dataclasses.dataclass(frozen=True, slots=True)
class Plan:
    """What every call of one ``.delay()`` / ``.delay_many()`` shares, resolved once."""

    job_function: JobSpec
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
    #: An ``expires`` given as a datetime (aware), else ``None``.
    expires_at: datetime.datetime | None
    #: An ``expires`` given in seconds, as milliseconds from the enqueue (at least 1); -1: none.
    expires_in_ms: int
    #: The queue's keys (the prefix is part of the setting the plan was resolved from).
    keys: QueueKeys
    #: The job-hash fields every call of the plan writes: the job name, and the options
    #: not at their defaults (``RECORD_DEFAULTS``): max attempts, timeout (ms), result
    #: TTL, an expiry (absolute, or ``exp_in`` ms from the enqueue, which the script
    #: stores as ``exp``). Read-only: every Submission of the plan shares it.
    record: Mapping[str, str | int]
    #: What every ``enqueue.lua`` call of the plan shares (``record`` among its field pairs).
    shared: calls.EnqueueShared
    #: ``RQUEUE["MAX_PAYLOAD_BYTES"]`` (for ``None``, the most a worker decodes:
    #: :data:`~django_rqueue.serialization.MAX_JSON_BYTES`).
    max_payload: int
    #: A caller-chosen id, ``"<queue>:<using(job_id=...)>"``; ``None``: a new random one each call.
    job_id: str | None

    @classmethod
    def of(cls, job_function: JobSpec, config: Config, options: JobOptions | None = None) -> Plan:
        """Resolve the options of ``job_function`` (``ValueError``: its queue is undeclared).

        Resolution, first set wins: ``using()``, ``@job(...)``, the queue's
        entry in ``RQUEUE["QUEUES"]``, ``RQUEUE["DEFAULTS"]``, built-in defaults.
        ``options`` replaces ``job_function.options`` (``using()`` and ``@job``) when given.
        """
        o = job_function.options if options is None else options
        cached = job_function._plan_cache
        if cached is not None and cached[0] is config and cached[1] is o:
            hit: Plan = cached[2]
            return hit
        plan = cls._resolve(job_function, config, o)
        # A naive run_at is read in the time zone active at each call (it may differ).
        if o.run_at is None or timezone.is_aware(o.run_at):
            job_function._plan_cache = (config, o, plan)
        return plan

    @classmethod
    def _resolve(cls, job_function: JobSpec, config: Config, o: JobOptions) -> Plan:
        queue = o.queue or config.default_queue
        qconf = config.queue(queue)
        status = JobStatus.QUEUED
        run_at, run_at_ms = o.run_at, -1
        if run_at is not None:
            if timezone.is_naive(run_at):
                run_at = timezone.make_aware(run_at)
            run_at_ms = int(run_at.timestamp() * 1000)
            status = JobStatus.SCHEDULED
        # JobOptions has already turned a timedelta into seconds.
        delay_ms = int((o.delay or 0) * 1000)
        if delay_ms > 0:
            status = JobStatus.SCHEDULED
        expires_at, expires_in_ms = None, -1
        if isinstance(o.expires, datetime.datetime):
            expires_at = o.expires
        elif o.expires is not None:
            expires_in_ms = max(1, math.ceil(o.expires * 1000))
        max_attempts = o.max_attempts or qconf.max_attempts
        timeout = o.timeout or qconf.timeout
        result_ttl = o.result_ttl if o.result_ttl is not None else qconf.result_ttl
        record: dict[str, str | int] = {JobFields.NAME: job_function.name}
        # Left out at their defaults (readers use RECORD_DEFAULTS then).
        for name, value in (
            (JobFields.MAX_ATTEMPTS, max_attempts),
            (JobFields.TIMEOUT_MS, int(timeout * 1000)),
            (JobFields.RESULT_TTL, result_ttl),
        ):
            if value != RECORD_DEFAULTS[name]:
                record[name] = value
        if job_function.sensitive is not None:
            record[JobFields.SENSITIVE] = job_function.sensitive.field()
        if expires_at is not None:
            record[JobFields.EXPIRES] = int(expires_at.timestamp() * 1000)
        elif expires_in_ms >= 0:
            record[JobFields.EXPIRES_IN] = expires_in_ms  # the script adds the enqueue time
        keys = QueueKeys.of(config.key_prefix, queue)
        priority, group, unique_ttl = o.priority or 0, o.group or "", o.unique_ttl or 0
        return cls(
            job_function=job_function,
            queue=queue,
            priority=priority,
            group=group,
            max_attempts=max_attempts,
            timeout=timeout,
            result_ttl=result_ttl,
            unique_key=o.unique_key,
            unique_ttl=unique_ttl,
            status=status,
            run_at=run_at,
            run_at_ms=run_at_ms,
            delay_ms=delay_ms,
            expires_at=expires_at,
            expires_in_ms=expires_in_ms,
            keys=keys,
            record=types.MappingProxyType(record),
            shared=calls.EnqueueShared(
                keys, (priority, group, delay_ms, run_at_ms), unique_ttl, tuple(calls.pairs(record))
            ),
            max_payload=config.max_payload_bytes or MAX_JSON_BYTES,
            job_id=None if o.job_id is None else f"{queue}:{o.job_id}",
        )

    def submission(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Submission:
        """Validate and encode one call; the submission writes it when called.

        Raises:
            TypeError: the arguments do not fit the job function's signature
                (:meth:`JobFunction.check_arguments`), or JSON cannot carry one.
            ValueError: their JSON is larger than ``RQUEUE["MAX_PAYLOAD_BYTES"]``.
        """
        self.job_function.check_arguments(args, kwargs)
        payload = encode_arguments(
            args, kwargs, self.job_function.func, skip=int(self.job_function.takes_context)
        )
        if len(payload) > self.max_payload:  # ASCII JSON: one byte per character
            raise ValueError(
                f"the arguments of {self.job_function.name} take {len(payload)} bytes as JSON, "
                f"more than RQUEUE['MAX_PAYLOAD_BYTES'] ({self.max_payload}): store the data "
                "elsewhere and pass its key"
            )
        payload = seal(payload)  # with RQUEUE["ENCRYPTION_KEYS"]: encrypted
        unique_key = self.unique_key
        if callable(unique_key):
            unique_key = unique_key(*args, **kwargs)
        job_id = self.job_id or new_job_id(self.queue)
        return Submission(self, job_id, args, kwargs, unique_key or "", payload)

    def job(
        self, job_id: str, args: Sequence[Any], kwargs: Mapping[str, Any], unique_key: str
    ) -> Job[Any]:
        """The :class:`Job` a call of this plan makes, as it is before it is written."""
        return Job(
            id=job_id,
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
            unique_key=unique_key,
            run_at=self.run_at,
            expires_at=self.expires_at,
            sensitive=self.job_function.sensitive,
        )


@dataclasses.dataclass(eq=False)
class Submission:
    """Writes one job to Redis, now or from ``transaction.on_commit``.

    Its :attr:`job` is built on first use: by a write, while Redis runs the
    script (the reply is not needed for that).
    """

    plan: Plan
    job_id: str
    args: Sequence[Any]
    kwargs: Mapping[str, Any]
    #: ``""``: none.
    unique_key: str
    #: The encoded arguments (JSON).
    payload: str
    #: Job-hash fields written besides the usual ones (the django.tasks backend's).
    extra: Mapping[str, str] = _NO_FIELDS

    @functools.cached_property
    def job(self) -> Job[Any]:
        """The Job returned to the caller, updated in place by the write."""
        return self.plan.job(self.job_id, self.args, self.kwargs, self.unique_key)

    def _job(self) -> Job[Any]:
        return self.job

    def pending_holder(self) -> Job[Any] | None:
        """The job already holding this job's unique key: in Redis, or waiting for this commit."""
        if not self.unique_key:
            return None
        client = get_client(self.plan.queue)
        with redis_errors(client):
            holder = client.get(self.plan.keys.unique(self.unique_key))
        if holder is not None:
            existing = get_job(as_text(holder))
            if existing and existing.status in HOLDING:
                return existing
        return _Pending.of_current().holder(self.plan.queue, self.unique_key)

    def __call__(self) -> Job[Any]:
        """Write the job; ``NotReplicated`` (after the signal) under ``MIN_REPLICAS_ACK``."""
        client, wait = get_client(self.plan.queue), replica_wait(get_config())
        call = self.call()
        if wait is None:
            reply = transitions.enqueue(client, call, meanwhile=self._job)
            acked = 0
        else:
            reply, acked = transitions.enqueue_and_wait(client, call, wait)
        outcome, job_id = reply.outcome, reply.job_id
        existing = get_job(job_id) if self._another_holds(outcome) else None
        if self._written(reply, existing):
            signals.send(signals.job_enqueued, self.plan.job_function, job=self.job)
        if wait is not None:
            _check_replicated(wait, [job_id] if outcome in WROTE else [], acked)
        return self.job

    async def awrite(self) -> Job[Any]:
        """:meth:`__call__` on redis-py's asyncio client (in a thread with ``CACHE_ALIAS``)."""
        client = get_async_client(self.plan.queue)
        if client is None:
            return await sync_to_async(self, thread_sensitive=True)()
        call = self.call()
        wait = replica_wait(get_config())
        if wait is None:
            reply = await transitions.aenqueue(client, call)
            acked = 0
        else:
            reply, acked = await transitions.aenqueue_and_wait(client, call, wait)
        outcome, job_id = reply.outcome, reply.job_id
        existing = await aget_job(job_id) if self._another_holds(outcome) else None
        if self._written(reply, existing):
            await signals.asend(signals.job_enqueued, self.plan.job_function, job=self.job)
        if wait is not None:
            _check_replicated(wait, [job_id] if outcome in WROTE else [], acked)
        return self.job

    def new_job(self) -> NewJob:
        """This job as the scripts that create one take it."""
        plan = self.plan
        return NewJob(
            self.job_id, plan.priority, plan.group, self.unique_key, plan.unique_ttl, self.fields()
        )

    def call(self) -> ScriptCall:
        """The ``enqueue.lua`` call that writes this job (:attr:`Plan.shared`, then its own
        payload and :attr:`extra` fields)."""
        own: list[calls.Arg] = [JobFields.PAYLOAD, self.payload]
        if self.extra:
            own += calls.pairs(self.extra)
        return self.plan.shared.call(self.job_id, self.unique_key, *own)

    def _another_holds(self, outcome: EnqueueOutcome) -> bool:
        """Whether the script found another job in this one's place (read it, return it):
        its unique key's holder, or a job already under a caller-chosen id (``EXISTS``
        otherwise means this very call's lost reply was resent)."""
        return outcome is EnqueueOutcome.DUPLICATE or (
            outcome is EnqueueOutcome.EXISTS and self.plan.job_id is not None
        )

    def _written(self, reply: transitions.EnqueueReply, existing: Job[Any] | None) -> bool:
        """Apply the script's answer to :attr:`job`; whether a job was created (announce it).

        A created job gets the enqueue time its record holds (Redis's clock, from
        the same reply). A duplicate's ``existing`` holder is copied in place: a
        Job returned earlier (before commit) then names the holder.
        """
        if existing is not None:
            self.job.assign(existing)
            return False
        job = self.job
        job.status = STATUSES[reply.state]
        if reply.enqueued_ms is not None:
            job.enqueued_at = ms_to_datetime(reply.enqueued_ms)
        return reply.outcome is EnqueueOutcome.CREATED

    def fields(self) -> dict[str, str | int]:
        """The job-hash fields this job is written with (an enqueue script's field pairs)."""
        fields = {**self.plan.record, JobFields.PAYLOAD: self.payload}
        if self.extra:
            fields.update(self.extra)
        return fields


class BatchSubmission:
    """Writes the jobs of one :meth:`JobFunction.delay_many` call, now or on commit.

    ``jobs`` are the Jobs returned to the caller, in call order; a call whose
    unique key an earlier call of the batch (or, after :meth:`resolve_pending`,
    a pending job) holds shares that Job. ``to_write`` are the submissions
    still to be written.
    """

    def __init__(
        self, job_function: JobSpec, submissions: list[Submission], batch_size: int
    ) -> None:
        self.job_function = job_function
        self.batch_size = batch_size
        self.jobs: list[Job[Any]] = []
        self.to_write: list[Submission] = []
        first: dict[str, Job[Any]] = {}
        for submission in submissions:
            key = submission.job.unique_key
            if key and key in first:
                self.jobs.append(first[key])
                continue
            if key:
                first[key] = submission.job
            self.jobs.append(submission.job)
            self.to_write.append(submission)

    def resolve_pending(self) -> None:
        """Inside a transaction: calls whose unique key a pending job holds get that job."""
        keep: list[Submission] = []
        for submission in self.to_write:
            holder = submission.pending_holder() if submission.job.unique_key else None
            if holder is None:
                keep.append(submission)
            else:
                self.jobs = [holder if j is submission.job else j for j in self.jobs]
        self.to_write = keep

    def __call__(self) -> list[Job[Any]]:
        """Write the jobs (see :meth:`_write`), sending the batches not known to be written
        again through a transient failure for up to :data:`ENQUEUE_PATIENCE` seconds.

        Raises:
            EnqueueIncomplete: the failure lasted longer; it says which jobs were written.
            NotReplicated: under ``MIN_REPLICAS_ACK``, a batch was not confirmed in time
                (later ones are not written).
        """
        if not self.to_write:
            return self.jobs
        client, keys = get_client(self.to_write[0].plan.queue), self.to_write[0].plan.keys
        pending = self.to_write  # not known to be written, in call order
        backoff = EqualJitterBackoff(cap=ENQUEUE_RETRY, base=ENQUEUE_RETRY / 8)
        deadline = time.monotonic() + ENQUEUE_PATIENCE
        failures = 0
        while True:
            try:
                for done in self._write(client, pending):
                    pending = pending[done:]
                return self.jobs
            except RedisUnavailable as exc:
                delay = backoff.compute(failures)
                failures += 1
                if isinstance(exc, RedisAuthenticationFailed) or (
                    time.monotonic() + delay > deadline
                ):
                    raise self._incomplete(client, keys, pending, exc) from exc
                time.sleep(delay)

    def _write(self, client: redis.Redis, pending: list[Submission]) -> Iterator[int]:
        """Write ``pending`` batch after batch, yielding how many of its first submissions
        each batch wrote (their Jobs updated); under ``MIN_REPLICAS_ACK`` one batch at a
        time, each followed by a ``WAIT``, raising ``NotReplicated`` for the first batch
        not confirmed."""
        first = pending[0]
        fields = first.fields()
        del fields[JobFields.PAYLOAD]  # every other field is the same for the whole batch
        options: dict[str, Any] = {
            "priority": first.plan.priority,
            "group": first.plan.group,
            "delay_ms": first.plan.delay_ms,
            "run_at_ms": first.plan.run_at_ms,
            "unique_ttl": first.plan.unique_ttl,
            "fields": fields,
        }
        keys = first.plan.keys
        wait = replica_wait(get_config())
        if wait is None:
            items = [self._item(s) for s in pending]
            start = 0
            for replies in transitions.enqueue_batches(
                client, keys, items, batch_size=self.batch_size, **options
            ):
                self._apply(pending[start : start + len(replies)], replies)
                start += len(replies)
                yield len(replies)
            return
        for start in range(0, len(pending), self.batch_size):
            batch = pending[start : start + self.batch_size]
            replies, acked = transitions.enqueue_batch_and_wait(
                client, keys, [self._item(s) for s in batch], wait, **options
            )
            self._apply(batch, replies)
            yield len(batch)
            wrote = [job_id for outcome, job_id, _ in replies if outcome in WROTE]
            _check_replicated(wait, wrote, acked)

    def _incomplete(
        self, client: redis.Redis, keys: QueueKeys, pending: list[Submission], cause: Exception
    ) -> EnqueueIncomplete:
        """The :class:`EnqueueIncomplete` of a write that stopped with ``pending`` not known to
        be written: the batches that may have been sent (two, pipelined) are looked up."""
        sent = pending[: 2 * self.batch_size]
        not_written = {id(s.job) for s in pending[len(sent) :]}
        unknown: set[int] = set()
        try:
            found = transitions.existing_jobs(client, keys, [s.job.id for s in sent])
        except RedisUnavailable:
            unknown = {id(s.job) for s in sent}
        else:
            not_written |= {id(s.job) for s, there in zip(sent, found, strict=True) if not there}
        return EnqueueIncomplete(
            self.jobs,
            written=[j for j in self.jobs if id(j) not in not_written | unknown],
            not_written=[j for j in self.jobs if id(j) in not_written],
            unknown=[j for j in self.jobs if id(j) in unknown],
            cause=cause,
        )

    @staticmethod
    def _item(submission: Submission) -> transitions.BatchItem:
        return transitions.BatchItem(
            submission.job.id, submission.job.unique_key, submission.payload
        )

    def _apply(self, written: list[Submission], replies: list[transitions.Enqueued]) -> None:
        """Apply the script's answers to the Jobs of ``written``; announce the created ones."""
        announce = signals.job_enqueued.has_listeners(self.job_function)
        for submission, (outcome, job_id, state) in zip(written, replies, strict=True):
            job = submission.job
            if outcome is EnqueueOutcome.DUPLICATE:
                existing = get_job(job_id)
                if existing is not None:
                    job.assign(existing)
                    continue
            job.status = STATUSES[state]
            if outcome is EnqueueOutcome.CREATED and announce:
                signals.send(signals.job_enqueued, self.job_function, job=job)


class _Pending:
    """The submissions of one database connection that wait for its commit, by unique key.

    Values are held weakly: the strong reference is the one Django keeps for
    the on-commit callback, so an entry disappears when Django runs the
    callback (commit) or drops it (rollback of the transaction or of the
    savepoint the call was made in). CPython frees them at once (reference
    counting; the submissions hold no reference cycle).
    """

    _by_connection: weakref.WeakKeyDictionary[BaseDatabaseWrapper, _Pending] = (
        weakref.WeakKeyDictionary()
    )

    def __init__(self) -> None:
        self.by_key: weakref.WeakValueDictionary[tuple[str, str], Submission] = (
            weakref.WeakValueDictionary()
        )

    @classmethod
    def of_current(cls) -> _Pending:
        connection = transaction.get_connection()
        pending = cls._by_connection.get(connection)
        if pending is None:
            pending = cls._by_connection[connection] = cls()
        return pending

    def holder(self, queue: str, unique_key: str) -> Job[Any] | None:
        submission = self.by_key.get((queue, unique_key))
        return None if submission is None else submission.job

    def add(self, submissions: Iterable[Submission]) -> None:
        for submission in submissions:
            if submission.job.unique_key:
                self.by_key[submission.job.queue, submission.job.unique_key] = submission


def _defer(callback: Callable[[], object], submissions: Iterable[Submission]) -> None:
    """Run ``callback`` when the current transaction commits; remember its unique keys."""
    transaction.on_commit(callback)
    _Pending.of_current().add(submissions)
