"""The write: submissions to Redis, one at a time or in batches, and the replication check.

Durable enqueue: with ``RQUEUE["MIN_REPLICAS_ACK"]`` > 0 every write is
followed by a ``WAIT`` on its connection, in one round trip (one per batch
for ``delay_many``, which then writes one batch at a time), and a job that
fewer replicas confirmed within ``MIN_REPLICAS_TIMEOUT`` raises
:class:`~django_rqueue.exceptions.NotReplicated` once it is announced (it
was written to the master). On commit it is raised from the ``on_commit``
callback, as :class:`~django_rqueue.exceptions.RedisUnavailable` is.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import redis
from asgiref.sync import sync_to_async
from redis.backoff import EqualJitterBackoff

from .. import signals
from ..conf import Config, get_config
from ..engine import commands, run
from ..engine.commands import BatchItem, Command
from ..engine.connection import get_async_client, get_client, ms_to_datetime
from ..engine.fields import JobFields
from ..engine.keys import QueueKeys
from ..engine.replies import Enqueued, EnqueueOutcome, EnqueueReply, confirmed
from ..engine.run import ReplicaWait
from ..exceptions import (
    EnqueueIncomplete,
    NotReplicated,
    RedisAuthenticationFailed,
    RedisUnavailable,
)
from ..job import STATUSES, Job, aget_job, get_job
from .plan import Submission

if TYPE_CHECKING:
    from ..types import JobSpec

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

#: Outcomes of a job this very call wrote (``exists``: its reply was lost and it was resent).
WROTE = frozenset({EnqueueOutcome.CREATED, EnqueueOutcome.EXISTS})


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


def write_one(submission: Submission) -> Job[Any]:
    """Write ``submission``'s job and return it; ``NotReplicated`` (after the signal) under
    ``MIN_REPLICAS_ACK``."""
    plan = submission.plan
    client, wait = get_client(plan.queue), replica_wait(get_config())
    call = submission.call()
    if wait is None:
        reply = run.execute(client, commands.enqueue(call), submission.make_job)
        acked = 0
    else:
        reply, acked = run.execute_and_wait(client, commands.enqueue(call), wait)
        acked = confirmed([reply.outcome], acked)
    outcome, job_id = reply.outcome, reply.job_id
    existing = get_job(job_id) if _another_holds(submission, outcome) else None
    if _written(submission, reply, existing):
        signals.send(signals.job_enqueued, plan.job_function, job=submission.job)
    if wait is not None:
        _check_replicated(wait, [job_id] if outcome in WROTE else [], acked)
    return submission.job


async def awrite_one(submission: Submission) -> Job[Any]:
    """:func:`write_one` on redis-py's asyncio client (in a thread with ``CACHE_ALIAS``)."""
    plan = submission.plan
    client = get_async_client(plan.queue)
    if client is None:
        return await sync_to_async(write_one, thread_sensitive=True)(submission)
    call = submission.call()
    wait = replica_wait(get_config())
    if wait is None:
        reply = await run.aexecute(client, commands.enqueue(call))
        acked = 0
    else:
        reply, acked = await run.aexecute_and_wait(client, commands.enqueue(call), wait)
        acked = confirmed([reply.outcome], acked)
    outcome, job_id = reply.outcome, reply.job_id
    existing = await aget_job(job_id) if _another_holds(submission, outcome) else None
    if _written(submission, reply, existing):
        await signals.asend(signals.job_enqueued, plan.job_function, job=submission.job)
    if wait is not None:
        _check_replicated(wait, [job_id] if outcome in WROTE else [], acked)
    return submission.job


def _another_holds(submission: Submission, outcome: EnqueueOutcome) -> bool:
    """Whether the script found another job in ``submission``'s place (read it, return it):
    its unique key's holder, or a job already under a caller-chosen id (``EXISTS``
    otherwise means this very call's lost reply was resent)."""
    return outcome is EnqueueOutcome.DUPLICATE or (
        outcome is EnqueueOutcome.EXISTS and submission.plan.job_id is not None
    )


def _written(submission: Submission, reply: EnqueueReply, existing: Job[Any] | None) -> bool:
    """Apply the script's answer to ``submission.job``; whether a job was created (announce it).

    A created job gets the enqueue time its record holds (Redis's clock, from
    the same reply). A duplicate's ``existing`` holder is copied in place: a
    Job returned earlier (before commit) then names the holder.
    """
    job = submission.job
    if existing is not None:
        job.assign(existing)
        return False
    job.status = STATUSES[reply.state]
    if reply.enqueued_ms is not None:
        job.enqueued_at = ms_to_datetime(reply.enqueued_ms)
    return reply.outcome is EnqueueOutcome.CREATED


class BatchSubmission:
    """Writes the jobs of one :meth:`~.BaseJobFunction.delay_many` call, now or on commit.

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

    def resolve_pending(self, holder_of: Callable[[Submission], Job[Any] | None]) -> None:
        """Inside a transaction: calls whose unique key a pending job holds get that job
        (``holder_of``: :func:`~django_rqueue.enqueue.commit.pending_holder`)."""
        keep: list[Submission] = []
        for submission in self.to_write:
            holder = holder_of(submission) if submission.job.unique_key else None
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
        # Every field but the payload is the plan's, the same for the whole batch (the
        # submissions of delay_many carry no extra fields), but for headers: jobs with
        # other headers than the one before them start a batch of their own.
        shared = pending[0].plan.batch_shared
        wait = replica_wait(get_config())
        headed = any(s.headers for s in pending)
        if wait is None:
            start = 0
            batches: Iterator[Command[list[Enqueued]]]
            if headed:
                batches = (self._command(batch) for batch in self._split(pending))
            else:
                items = [self._item(s) for s in pending]
                batches = commands.enqueue_batches(shared, items, self.batch_size)
            for replies in run.execute_pipelined(client, batches):
                self._apply(pending[start : start + len(replies)], replies)
                start += len(replies)
                yield len(replies)
            return
        for batch in self._split(pending):
            command = self._command(batch)
            replies, acked = run.execute_and_wait(client, command, wait)
            acked = confirmed((outcome for outcome, _, _ in replies), acked)
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
            found = run.execute(client, commands.existing_jobs(keys, [s.job.id for s in sent]))
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

    def _split(self, pending: list[Submission]) -> Iterator[list[Submission]]:
        """``pending`` in batches of at most ``batch_size`` submissions of equal headers."""
        batch: list[Submission] = []
        for submission in pending:
            if batch and (len(batch) == self.batch_size or submission.headers != batch[0].headers):
                yield batch
                batch = []
            batch.append(submission)
        if batch:
            yield batch

    def _command(self, batch: list[Submission]) -> Command[list[Enqueued]]:
        """``enqueue_batch.lua`` for ``batch`` (submissions of equal headers): the plan's
        shared fields, with the headers among them."""
        first = batch[0]
        shared = first.plan.batch_shared
        if first.headers:
            plan_shared = first.plan.shared
            fields = (*plan_shared.fields, JobFields.HEADERS, first.headers)
            shared = plan_shared._replace(fields=fields).batch()
        return commands.enqueue_batch(shared, [self._item(s) for s in batch])

    @staticmethod
    def _item(submission: Submission) -> BatchItem:
        return BatchItem(submission.job.id, submission.job.unique_key, submission.payload)

    def _apply(self, written: list[Submission], replies: list[Enqueued]) -> None:
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
