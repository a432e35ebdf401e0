"""Plan and Submission (pure): a job function's options resolved once into the job record and the
shared script arguments, and each call's arguments validated and encoded.

A :class:`Plan` is what every call of one ``.delay()`` / ``.delay_many()``
shares: the queue, the job-hash fields (:attr:`Plan.record`) and the part of
the ``enqueue.lua`` call every job of it shares (:attr:`Plan.shared`), or of
the ``enqueue_batch.lua`` call every batch of it shares (:attr:`Plan.batch_shared`).
:meth:`Plan.submission` validates and encodes one call's arguments into a
:class:`Submission`, which :mod:`~django_rqueue.enqueue.write` writes. Pure:
nothing here talks to Redis or to the database.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import json
import math
import types
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from ..conf import Config
from ..encryption import seal
from ..engine import calls
from ..engine.calls import NewJob, ScriptCall
from ..engine.fields import RECORD_DEFAULTS, JobFields
from ..engine.keys import QueueKeys, new_job_id
from ..job import Job, JobStatus
from ..middleware import EnqueueCall, chain_of, enqueue_headers
from ..options import JobOptions
from ..serialization import MAX_JSON_BYTES, encode_arguments

if TYPE_CHECKING:
    from ..types import JobSpec

#: No extra job-hash fields (the default of :attr:`Submission.extra`).
_NO_FIELDS: Mapping[str, str] = types.MappingProxyType({})


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
    #: What every ``enqueue_batch.lua`` call of the plan shares (``record`` as its fields).
    batch_shared: calls.BatchShared
    #: ``RQUEUE["MAX_PAYLOAD_BYTES"]`` (for ``None``, the most a worker decodes:
    #: :data:`~django_rqueue.conf.defaults.MAX_JSON_BYTES`).
    max_payload: int
    #: A caller-chosen id, ``"<queue>:<using(job_id=...)>"``; ``None``: a new random one each call.
    job_id: str | None
    #: The enqueue hooks of ``RQUEUE["MIDDLEWARE"]`` (:mod:`~django_rqueue.middleware`), run
    #: on each call before it is written; ``()``: none (nothing else is done then).
    enqueue_hooks: tuple[Callable[[EnqueueCall], None], ...] = ()

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
        shared = calls.EnqueueShared(
            keys, (priority, group, delay_ms, run_at_ms), unique_ttl, tuple(calls.pairs(record))
        )
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
            shared=shared,
            batch_shared=shared.batch(),
            max_payload=config.max_payload_bytes or MAX_JSON_BYTES,
            job_id=None if o.job_id is None else f"{queue}:{o.job_id}",
            enqueue_hooks=chain_of(config.middleware).enqueue,
        )

    def submission(
        self,
        args: Sequence[Any],
        kwargs: Mapping[str, Any],
        *,
        entry: str | None = None,
        hooks: bool = True,
    ) -> Submission:
        """Validate and encode one call; the submission writes it when called.

        The middleware's enqueue hooks see it here (``hooks=False``: not, for a call that
        is only checked and never written); ``entry``: the periodic entry it is a run of.

        Raises:
            TypeError: the arguments do not fit the job function's signature
                (:meth:`~.BaseJobFunction.check_arguments`), or JSON cannot carry one.
            ValueError: their JSON is larger than ``RQUEUE["MAX_PAYLOAD_BYTES"]``.
            InvalidHeaders: the middleware left headers that are not ``str -> str`` or
                are too large (:func:`~django_rqueue.middleware.enqueue_headers`).
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
        submission = Submission(self, job_id, args, kwargs, unique_key or "", payload)
        if self.enqueue_hooks and hooks:
            submission.headers = self.headers(job_id, args, kwargs, entry)
        return submission

    def headers(
        self,
        job_id: str,
        args: Sequence[Any],
        kwargs: Mapping[str, Any],
        entry: str | None = None,
    ) -> str:
        """Run the middleware's enqueue hooks on one job of this plan; its headers as the
        record stores them (``""``: none). Raises what
        :func:`~django_rqueue.middleware.enqueue_headers` raises."""
        if not self.enqueue_hooks:
            return ""
        name = self.job_function.name
        return enqueue_headers(self.enqueue_hooks, name, self.queue, job_id, args, kwargs, entry)

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
    """One call of a plan, validated and encoded: what
    :mod:`~django_rqueue.enqueue.write` writes to Redis, now or from
    ``transaction.on_commit``.

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
    #: The job's headers as the record stores them (JSON, :mod:`~django_rqueue.headers`);
    #: ``""``: none (the field is left out).
    headers: str = ""
    #: More work that does not need the reply, done by :meth:`make_job` while Redis runs
    #: the script (the ``django.tasks`` backend builds its ``TaskResult`` then); ``None``: none.
    overlap: Callable[[], object] | None = None

    @functools.cached_property
    def job(self) -> Job[Any]:
        """The Job returned to the caller, updated in place by the write."""
        job = self.plan.job(self.job_id, self.args, self.kwargs, self.unique_key)
        if self.headers:
            job.headers = json.loads(self.headers)
        return job

    def make_job(self) -> Job[Any]:
        """:attr:`job` (a write builds it while Redis runs the script), after :attr:`overlap`."""
        if self.overlap is not None:
            self.overlap()
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
        if self.headers:
            own += (JobFields.HEADERS, self.headers)
        return self.plan.shared.call(self.job_id, self.unique_key, *own)

    def fields(self) -> dict[str, str | int]:
        """The job-hash fields this job is written with (an enqueue script's field pairs)."""
        fields = {**self.plan.record, JobFields.PAYLOAD: self.payload}
        if self.extra:
            fields.update(self.extra)
        if self.headers:
            fields[JobFields.HEADERS] = self.headers
        return fields
