"""The :class:`Job` record as read from Redis, and :func:`get_job`."""

from __future__ import annotations

import datetime
import enum
from dataclasses import dataclass, field
from typing import Any, cast

import redis
from asgiref.sync import sync_to_async

from . import record
from .conf import get_config
from .dependencies import Dependents
from .encryption import open_fields
from .engine import commands, flows, run
from .engine.calls import CancelMode
from .engine.connection import (
    as_text,
    get_async_client,
    ms_to_datetime,
    new_async_client,
    redis_errors,
    wrong_type,
)
from .engine.fields import JobFields
from .engine.keys import queue_of
from .engine.queue_ref import queue_ref
from .exceptions import JobStateError
from .headers import decode as decode_headers
from .inputs import Inputs
from .progress import Progress, read_metadata, read_progress
from .record import MAX_TIMEOUT as MAX_TIMEOUT  # the public name django_rqueue.job.MAX_TIMEOUT
from .sensitive import Sensitive
from .serialization import decode_arguments, join_payload, loads


class JobStatus(enum.StrEnum):
    """Where a job is in its lifecycle (``docs/explanation/guarantee.md``, "The job lifecycle")."""

    #: Waiting for its inputs (a node of a workflow, or ``using(depends_on=...)``): it is
    #: released (queued, or scheduled after its ``delay``) in the same Redis script as
    #: its last input's end, or ends ``cancelled`` (:class:`CancelReason`).
    WAITING = "waiting"
    #: Waiting for its run-at time (delayed, or between retries).
    SCHEDULED = "scheduled"
    #: Ready; a worker will reserve it.
    QUEUED = "queued"
    #: Reserved by a worker under a lease.
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    #: In the failed store after its last attempt; ``retry()`` re-queues it.
    FAILED = "failed"
    #: Withdrawn before it ran; the record expires after ``result_ttl``.
    CANCELLED = "cancelled"


class CancelReason(enum.StrEnum):
    """Why a job ended ``cancelled`` other than by :meth:`Job.cancel`: :attr:`Job.cancel_reason`."""

    #: Its expiry (``expires=``) came before a worker started it: it never ran.
    EXPIRED = "expired"
    #: It waited for inputs under ``on_dependency_failure="cancel"`` (the default) and one
    #: of them failed, was cancelled or expired: it never ran.
    DEPENDENCY_FAILED = "dependency_failed"
    #: Its inputs had not all ended by its dependency deadline
    #: (``RQUEUE["WORKFLOW_DEPENDENCY_TIMEOUT"]``, ``using(dependency_timeout=...)``): it
    #: never ran.
    DEPENDENCY_TIMEOUT = "dependency_timeout"
    #: Its workflow was cancelled (``Workflow.cancel()``) before it ended; a running job was
    #: stopped as :meth:`Job.cancel` stops one.
    WORKFLOW_CANCELLED = "workflow_cancelled"


#: The states a job does not leave by itself; ``Job.wait`` returns in them.
FINISHED = frozenset({JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED})


#: Job states by name (a dict lookup costs less than ``JobStatus(name)``).
STATUSES: dict[str, JobStatus] = {status.value: status for status in JobStatus}


@dataclass
class Job[R]:
    """One job, as last read from Redis (call :meth:`refresh` to read again).

    Times are aware UTC datetimes (Redis server clock). ``error`` is ``None``
    or ``{"type": "module.ExceptionClass", "message": str, "traceback": str}``
    for the latest failed attempt (``None`` again once an attempt succeeds),
    plus ``"worker"``, the id of the worker that ran that attempt, when the
    record names one; ``errors`` holds one such dict per failed attempt, oldest first.
    ``problems`` lists what could not be decoded from a corrupt record (the
    rest is still filled in; :attr:`corrupt` tells whether there is any): a
    worker fails such a job at once, without retrying it.
    """

    id: str
    name: str
    queue: str
    status: JobStatus
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    priority: int = 0
    group: str = ""
    attempts: int = 0
    max_attempts: int = 1
    #: Hard limit of one attempt, in seconds (at most :data:`~.record.MAX_TIMEOUT`).
    timeout: float = 0.0
    #: Seconds the finished record is kept.
    result_ttl: int = 0
    enqueued_at: datetime.datetime | None = None
    run_at: datetime.datetime | None = None
    started_at: datetime.datetime | None = None
    finished_at: datetime.datetime | None = None
    #: The return value of a success (``None`` until then); ``R`` is the job function's
    #: return type, so ``send_mail.delay(...)`` gives a ``Job[int]`` for an ``-> int`` job.
    result: R | None = None
    error: dict[str, str] | None = None
    errors: list[dict[str, str]] = field(default_factory=list)
    #: Fencing token of the current (or last) reservation.
    token: int = 0
    #: Id of the worker running the job while it runs; after a success, of the one that ran it.
    worker: str = ""
    unique_key: str = ""
    #: When the job expires (``expires=``): not started by then, it is never run but
    #: ends ``cancelled`` with :attr:`cancel_reason` ``EXPIRED``. ``None``: it never
    #: expires (or, on the Job ``.delay()`` returns for an ``expires`` in seconds, it is
    #: only known once read from Redis: :meth:`refresh`).
    expires_at: datetime.datetime | None = None
    #: Why a ``cancelled`` job was cancelled, when not by :meth:`cancel` (``None`` then).
    cancel_reason: CancelReason | None = None
    #: When :meth:`cancel` was first called while the job ran (its worker is stopping
    #: it); ``None`` otherwise.
    cancel_requested_at: datetime.datetime | None = None
    #: The ``run_after`` of a deferred ``django.tasks`` task, as it was enqueued
    #: (``run_at`` moves with retries); ``None`` for every other job.
    task_run_after: datetime.datetime | None = None
    #: The arguments hidden from people (``@job(sensitive=...)``), as the record names
    #: them; ``None``: none. :attr:`args` and :attr:`kwargs` keep the real values.
    sensitive: Sensitive | None = None
    #: The workflow it is a node of (or the finisher or a callback of); ``None``: none.
    workflow_id: str | None = None
    #: What it waits for, or waited for (a workflow node after another, a job enqueued
    #: with ``using(depends_on=...)``); ``None`` for a job that never had inputs.
    inputs: Inputs | None = None
    #: The jobs waiting for its outcome; ``None`` when none is.
    dependents: Dependents | None = None
    #: The latest progress the job reported (``JobContext.set_progress``); ``None``: none.
    progress: Progress | None = None
    #: What the job saved with ``JobContext.save_metadata`` (``{}``: nothing).
    metadata: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    #: Its headers (``str -> str``, :mod:`~django_rqueue.headers`), written at enqueue by
    #: ``RQUEUE["MIDDLEWARE"]``, never passed to the function; ``{}``: none.
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def corrupt(self) -> bool:
        """Whether the record was corrupt (:attr:`problems` says what)."""
        return bool(self.problems)

    @classmethod
    def unreadable(cls, job_id: str, reason: str) -> Job[Any]:
        """The Job of a record Redis cannot read as a job hash (a key of another type
        where the hash should be): status ``failed``, ``reason`` in :attr:`problems`."""
        job = cls.from_fields(job_id, {})
        job.problems = [f"unreadable record: {reason}"]
        return job

    @classmethod
    def from_fields(cls, job_id: str, fields: dict[bytes, bytes] | dict[str, str]) -> Job[Any]:
        """Build a Job from a job hash (``HGETALL``); never raises on corrupt data.

        A field that cannot be decoded (a number or time that is not one, JSON that is
        invalid, nested deeper than ``serialization.MAX_JSON_DEPTH`` or longer than
        ``serialization.MAX_JSON_BYTES``, bytes that are not UTF-8, an unknown state)
        is left at its default and described in :attr:`problems`. A ``timeout`` above
        :data:`~.record.MAX_TIMEOUT` reads as that; the error history reads at most as
        many ``err:<n>`` fields as the hash has fields, whatever its count says.
        """
        f: dict[str, bytes | str]
        if fields and type(next(iter(fields))) is bytes:
            # A worker builds one Job per job it runs: a lookup of the known names costs
            # less than decoding each.
            from_redis = cast(dict[bytes, bytes], fields)
            name_of = record.FIELD_NAMES.get
            f = {name_of(k) or k.decode("utf-8", "replace"): v for k, v in from_redis.items()}
        else:
            f = {as_text(k): v for k, v in fields.items()}
        problems: list[str] = []
        f = open_fields(f, problems)  # decrypts, with RQUEUE["ENCRYPTION_KEYS"]
        state = as_text(f.get(JobFields.STATE))
        status = STATUSES.get(state)
        if status is None:
            problems.append(f"unknown state {state!r}")
            status = JobStatus.FAILED
        name = as_text(f.get(JobFields.NAME))
        if not name:
            problems.append("no job name")
        timeout_ms = record.number(f, JobFields.TIMEOUT_MS, record.DEFAULT_TIMEOUT_MS, problems)
        job = cls(
            id=job_id,
            name=name,
            queue=queue_of(job_id) or "",
            status=status,
            priority=record.number(f, JobFields.PRIORITY, 0, problems),
            group=as_text(f.get(JobFields.GROUP)),
            attempts=record.number(f, JobFields.ATTEMPTS, 0, problems),
            # Absent at their defaults (RECORD_DEFAULTS).
            max_attempts=record.number(
                f, JobFields.MAX_ATTEMPTS, record.DEFAULT_MAX_ATTEMPTS, problems
            ),
            timeout=min(timeout_ms, record.MAX_TIMEOUT_MS) / 1000,
            result_ttl=record.number(f, JobFields.RESULT_TTL, record.DEFAULT_RESULT_TTL, problems),
            enqueued_at=record.time(f, JobFields.ENQUEUED_AT, problems),
            # Left out of the hash while it equals the enqueue time (enqueue_job.lua).
            run_at=ms_to_datetime(f.get(JobFields.RUN_AT) or f.get(JobFields.ENQUEUED_AT)),
            started_at=record.time(f, JobFields.STARTED_AT, problems),
            finished_at=record.time(f, JobFields.FINISHED_AT, problems),
            token=record.number(f, JobFields.TOKEN, 0, problems),
            worker=as_text(f.get(JobFields.WORKER)),
            unique_key=as_text(f.get(JobFields.UNIQUE_KEY)),
            expires_at=record.time(f, JobFields.EXPIRES, problems),
            cancel_requested_at=record.time(f, JobFields.CANCEL_REQUESTED, problems),
            problems=problems,
        )
        try:
            job.args, job.kwargs = decode_arguments(join_payload(f))
        except ValueError as exc:
            problems.append(f"undecodable payload: {exc}")
        if JobFields.RESULT in f:
            try:
                job.result = loads(f[JobFields.RESULT])
            except ValueError as exc:
                problems.append(f"undecodable result: {exc}")
        errors = []
        # Bounded by the fields present: a corrupt count (10**9) costs nothing.
        for n in range(1, min(record.integer(f.get(JobFields.ERROR_COUNT)), len(f)) + 1):
            raw = f.get(JobFields.error_part(n))
            if raw is not None:
                errors.append(record.error_record(raw, problems))
        job.errors = errors
        if JobFields.TASK_RUN_AFTER in f:
            try:
                job.task_run_after = datetime.datetime.fromisoformat(
                    as_text(f[JobFields.TASK_RUN_AFTER])
                )
            except ValueError:
                problems.append("undecodable task run_after")
        if JobFields.ERROR in f:
            job.error = record.error_record(f[JobFields.ERROR], problems)
        if JobFields.SENSITIVE in f:
            job.sensitive = Sensitive.parse(f[JobFields.SENSITIVE])
        if JobFields.HEADERS in f:
            job.headers = decode_headers(f[JobFields.HEADERS], problems)
        if JobFields.WORKFLOW in f:
            job.workflow_id = as_text(f[JobFields.WORKFLOW])
        if JobFields.INPUT_COUNT in f:
            try:
                job.inputs = Inputs.of(f)
            except ValueError as exc:
                problems.append(f"undecodable inputs: {exc}")
        if JobFields.DEPENDENTS in f:
            try:
                job.dependents = Dependents.decode(f[JobFields.DEPENDENTS])
            except ValueError as exc:
                problems.append(f"undecodable dependents: {exc}")
        if JobFields.PROGRESS in f:
            job.progress = read_progress(f, problems)
        if JobFields.METADATA in f:
            job.metadata = read_metadata(f, problems)
        if JobFields.CANCEL_REASON in f:
            reason = as_text(f[JobFields.CANCEL_REASON])
            try:
                job.cancel_reason = CancelReason(reason)
            except ValueError:
                problems.append(f"unknown cancel reason {reason!r}")
        return job

    def refresh(self) -> None:
        """Read the job again from Redis.

        Raises:
            JobStateError: the record no longer exists (it expired or was deleted).
            RedisUnavailable: Redis cannot be reached.
        """
        self._assign_fresh(get_job(self.id))

    async def arefresh(self) -> None:
        """:meth:`refresh` for async code, on redis-py's asyncio client (see :func:`aget_job`)."""
        self._assign_fresh(await aget_job(self.id))

    def _assign_fresh(self, fresh: Job[Any] | None) -> None:
        if fresh is None:
            raise JobStateError(f"job {self.id} no longer exists", None)
        self.assign(fresh)

    def wait(self, timeout: float) -> Job[R]:
        """Block until the job succeeded, failed for good or was cancelled; return it, refreshed.

        The job is refreshed in place (as :meth:`refresh` does) and returned.
        No polling: the waiter marks the job as awaited, reads it, then blocks
        on a Redis list (``BLPOP``) that the job's terminal transition pushes
        to (``docs/explanation/enqueue.md``, "Waiting for a job"). A job that is already
        finished returns at once.

        Raises:
            TimeoutError: still not finished after ``timeout`` seconds (the
                object then holds the latest state read).
            ValueError: ``timeout`` is not a number >= 0.
            JobStateError: the record no longer exists (deleted, expired, or a
                success with ``result_ttl=0``).
            RedisUnavailable: Redis cannot be reached.
        """
        deadline = flows.deadline_of(timeout)
        ref = queue_ref(self.queue)
        if not run.drive(ref.client(), self._wait_flow(deadline)):
            raise self._timed_out(timeout)
        return self

    async def await_(self, timeout: float) -> Job[R]:
        """:meth:`wait` for async code (``await job.await_(5)``), without blocking the event loop.

        Uses redis-py's asyncio client (one connection for the wait); with
        ``CACHE_ALIAS`` (django-redis has no asyncio client) :meth:`wait` runs
        in a worker thread instead. Raises what :meth:`wait` raises.
        """
        deadline = flows.deadline_of(timeout)
        client = new_async_client(self.queue)
        if client is None:
            return await sync_to_async(self.wait, thread_sensitive=False)(timeout)
        try:
            if not await run.adrive(client, self._wait_flow(deadline)):
                raise self._timed_out(timeout)
            return self
        finally:
            await client.aclose()

    def _wait_flow(self, deadline: float) -> flows.Flow[bool]:
        """:func:`~.engine.flows.wait_for_job` for this job, refreshing it at each read."""
        return flows.wait_for_job(queue_ref(self.queue).keys, self.id, deadline, self._settled)

    def _settled(self, fields: dict[bytes, bytes]) -> bool:
        """Refresh from a read of the record (``JobStateError``: it is gone); whether finished."""
        if not fields:
            raise JobStateError(f"job {self.id} no longer exists", None)
        self.assign(Job.from_fields(self.id, fields))
        return self.status in FINISHED

    def _timed_out(self, timeout: float) -> TimeoutError:
        return TimeoutError(f"job {self.id} is still {self.status} after {timeout} s")

    def assign(self, other: Job[Any]) -> None:
        """Make this object a copy of ``other`` (in place: callers keep their reference)."""
        self.__dict__.update(other.__dict__)

    def cancel(self) -> None:
        """Withdraw the job if it is scheduled, queued or failed; stop it if it runs.

        The record stays, with status ``cancelled``, for ``result_ttl`` seconds.
        A running job stays ``running`` until its worker has stopped it (this
        returns at once, with :attr:`cancel_requested_at` set): the worker's
        master sees the request within about a second, raises
        :class:`~django_rqueue.exceptions.JobCancelled` in the job (soft), kills
        the child ``RQUEUE["TIMEOUT_GRACE"]`` seconds later if the job still
        runs (hard), and ends the job ``cancelled``, not retried. Only workers
        started by ``rqueue_work`` stop running jobs. :meth:`wait` returns once
        it ended.

        Raises:
            JobStateError: the job finished or is gone (``.state`` tells).
        """
        self._withdraw("cancel")

    def delete(self) -> None:
        """Remove the job and its record, in any state but running.

        Raises:
            JobStateError: the job is running or gone.
        """
        self._withdraw("delete")

    def _withdraw(self, mode: CancelMode) -> None:
        ref = queue_ref(self.queue)
        ttl = max(1, self.result_ttl or ref.config.result_ttl)
        keys, client = ref.keys, ref.client()
        if run.execute(client, commands.cancel(keys, self.id, mode, ttl)) == JobStatus.RUNNING:
            self.status = JobStatus.RUNNING
            with redis_errors(client):
                requested = client.hget(keys.job(self.id), JobFields.CANCEL_REQUESTED)
            self.cancel_requested_at = ms_to_datetime(requested)
        else:
            self.status = JobStatus.CANCELLED

    def run_now(self) -> None:
        """Queue a scheduled job (a delayed job or a retry waiting for its backoff) at once.

        Raises:
            JobStateError: the job is not in state ``scheduled``.
            RedisUnavailable: Redis cannot be reached.
        """
        ref = queue_ref(self.queue)
        run.execute(ref.client(), commands.run_now(ref.keys, self.id))
        self.status = JobStatus.QUEUED

    def retry(self) -> None:
        """Re-queue a failed job with a fresh attempt budget (attempts back to 0).

        Raises:
            JobStateError: the job is not in state ``failed``.
        """
        ref = queue_ref(self.queue)
        run.execute(ref.client(), commands.retry(ref.keys, self.id))
        self.status = JobStatus.QUEUED
        self.attempts = 0


def get_job(job_id: str) -> Job[Any] | None:
    """Return the job with id ``job_id`` from any process, or ``None`` if unknown.

    The queue is read from the id itself (``"<queue>:<random part>"``), so one
    ``HGETALL`` suffices. An id of the wrong shape, or of a queue that is not
    declared any more, returns ``None``; a corrupt record returns a Job whose
    :attr:`~Job.problems` say what is wrong (:meth:`Job.from_fields`, :meth:`Job.unreadable`).

    Raises:
        RedisUnavailable: Redis cannot be reached.
    """
    queue = _declared_queue(job_id)
    if queue is None:
        return None
    ref = queue_ref(queue)
    try:
        fields = run.execute(ref.client(), commands.read_job(ref.keys, job_id))
    except redis.ResponseError as exc:
        if not wrong_type(exc):
            raise
        return Job.unreadable(job_id, str(exc))
    return Job.from_fields(job_id, fields) if fields else None


async def aget_job(job_id: str) -> Job[Any] | None:
    """:func:`get_job` for async code, without blocking the event loop.

    Uses redis-py's asyncio client (one per event loop, kept for the loop's
    life); with ``CACHE_ALIAS`` (django-redis has no asyncio client)
    :func:`get_job` runs in a thread instead.

    Raises:
        RedisUnavailable: Redis cannot be reached.
    """
    queue = _declared_queue(job_id)
    if queue is None:
        return None
    client = get_async_client(queue)
    if client is None:
        return await sync_to_async(get_job, thread_sensitive=False)(job_id)
    try:
        fields = await run.aexecute(client, commands.read_job(queue_ref(queue).keys, job_id))
    except redis.ResponseError as exc:
        if not wrong_type(exc):
            raise
        return Job.unreadable(job_id, str(exc))
    return Job.from_fields(job_id, fields) if fields else None


def _declared_queue(job_id: str) -> str | None:
    """The declared queue ``job_id`` belongs to, or ``None`` (``TypeError``: not a str)."""
    if not isinstance(job_id, str):
        raise TypeError(f"job id must be a str, not {type(job_id).__name__}")
    queue = queue_of(job_id)
    return queue if queue is not None and queue in get_config().queues else None
