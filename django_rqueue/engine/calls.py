"""One builder per Lua script: the ``KEYS`` and ``ARGV`` of a call, in the script's order.

Every caller of a script, whether it waits for the reply
(:mod:`~django_rqueue.engine.commands`) or sends now and reads later
(:mod:`~django_rqueue.engine.pipelining`), builds its call here, so a change
to a script's header is made in exactly one Python function. Each builder
says which script it calls; the header of that ``.lua`` file documents every
key and argument. Durations are milliseconds, TTLs seconds. The replies are
read by :mod:`~django_rqueue.engine.replies`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Literal, NamedTuple

from ..conf import RateLimit
from .keys import QueueKeys

if TYPE_CHECKING:
    from ..conf import QueueConfig

#: An ``ARGV`` entry as redis-py sends it.
Arg = str | int | float
#: ``cancel.lua``'s mode: keep the record as cancelled, or remove it.
CancelMode = Literal["cancel", "delete"]
#: ``failed_batch.lua``'s mode: re-queue the failed jobs, or remove them.
FailedBatchMode = Literal["retry", "delete"]


#: Old failed jobs one script call deletes at most (the failed store's retention), so
#: that one call never holds Redis for long on a huge backlog: a call that reaches it
#: leaves the rest to the next failure or the poller's next round.
TRIM_LIMIT = 100


class Retention(NamedTuple):
    """The failed store's retention of a queue, as ``fail``, ``reclaim`` and ``trim_failed``
    take it (``include/trim_failed.lua``): the oldest failed jobs are deleted first."""

    #: Seconds a failed job is kept (``None``: forever).
    ttl: int | None
    #: Failed jobs kept at most (``None``: no cap).
    max_jobs: int | None
    #: Failed jobs deleted per script call at most.
    limit: int = TRIM_LIMIT

    @classmethod
    def of(cls, queue: QueueConfig) -> Retention:
        """The retention of a queue's settings (``failed_ttl``, ``failed_max``)."""
        return cls(queue.failed_ttl, queue.failed_max)

    def args(self) -> list[Arg]:
        """The scripts' ``ARGV``: TTL in ms, max jobs (``-1``: no such limit), limit."""
        ttl_ms = -1 if self.ttl is None else self.ttl * 1000
        return [ttl_ms, -1 if self.max_jobs is None else self.max_jobs, self.limit]


class ScriptCall(NamedTuple):
    """One call of the script ``engine/scripts/<script>.lua``."""

    script: str
    keys: list[str]
    args: list[Arg]


class NewJob(NamedTuple):
    """A job to create, as every script that creates one takes it (``enqueue.lua``,
    ``schedule_claim.lua``, ``schedule_run_now.lua``; ``include/create_job.lua``)."""

    job_id: str
    #: -100..100.
    priority: int
    #: ``""``: the default group.
    group: str
    #: ``""``: none.
    unique_key: str
    #: Seconds the unique key is held at most (0: until the job ends).
    unique_ttl: int
    #: Job-hash fields, copied into the hash (``n``, ``p``, the options not at their defaults).
    fields: Mapping[str, str | int]


def pairs(fields: Mapping[str, str | int]) -> list[Arg]:
    """``fields`` as the flat ``name, value, ...`` list the scripts take."""
    flat: list[Arg] = []
    for name, value in fields.items():
        flat += [name, value]
    return flat


class EnqueueShared(NamedTuple):
    """The part of an ``enqueue.lua`` call that jobs enqueued with the same options share.

    A ``.delay()`` plan builds it once (``enqueue.Plan``), so that each call
    builds only its own job's arguments: its id, unique key and payload (one
    call built from a :class:`NewJob` cost about 2 µs more, on the path of every
    ``.delay()``, in the bench).
    """

    keys: QueueKeys
    #: ``ARGV[2..5]``: priority (-100..100), group (``""``: the default one), delay in ms,
    #: run-at in ms since the epoch (UTC) or -1.
    options: tuple[int, str, int, int]
    #: Seconds the unique key is held at most (0: until the job ends).
    unique_ttl: int
    #: Field pairs, flattened, that every job is written with (``n``, the options not at
    #: their defaults).
    fields: tuple[Arg, ...] = ()

    def call(self, job_id: str, unique_key: str, *fields: Arg) -> ScriptCall:
        """``enqueue.lua`` for one job. ``unique_key``: ``""`` for none. ``fields``: this
        job's own field pairs, flattened, after the shared ones (for a name given in both,
        the job's value is stored: the script's ``HSET`` keeps the last)."""
        keys = self.keys
        script_keys = [keys.base, keys.job(job_id)]
        if unique_key:
            script_keys.append(keys.unique(unique_key))
        args: list[Arg] = [job_id, *self.options, unique_key, self.unique_ttl, *self.fields]
        args += fields
        return ScriptCall("enqueue", script_keys, args)

    def batch(self) -> BatchShared:
        """These options as ``enqueue_batch.lua`` takes them (the batches of ``.delay_many()``)."""
        head = (*self.options, self.unique_ttl, len(self.fields) // 2, *self.fields)
        return BatchShared(self.keys, head)


def enqueue(keys: QueueKeys, job: NewJob, *, delay_ms: int, run_at_ms: int) -> ScriptCall:
    """``enqueue.lua``: create one job (the script derives the queue's other keys)."""
    shared = EnqueueShared(keys, (job.priority, job.group, delay_ms, run_at_ms), job.unique_ttl)
    return shared.call(job.job_id, job.unique_key, *pairs(job.fields))


class BatchShared(NamedTuple):
    """The part of an ``enqueue_batch.lua`` call that every batch of jobs with the same
    options shares: :class:`EnqueueShared`'s twin for ``.delay_many()``.

    A ``.delay()`` plan builds it once (``enqueue.Plan.batch_shared``, from
    :meth:`EnqueueShared.batch`), so that each batch builds only its items' arguments.
    """

    keys: QueueKeys
    #: ``ARGV`` before the items: priority (-100..100), group (``""``: the default one),
    #: delay in ms, run-at in ms since the epoch (UTC) or -1, unique TTL in seconds (0: until
    #: the job ends), the number of shared fields, then those fields' pairs, flattened.
    head: tuple[Arg, ...]

    def call(self, items: Iterable[tuple[str, str, str]], *, with_unique: bool) -> ScriptCall:
        """``enqueue_batch.lua``: create the jobs ``items`` (``(id, payload, unique key)``).

        ``with_unique``: every item carries a unique key (``False``: none does, and
        the keys are not sent).
        """
        args: list[Arg] = [*self.head, 1 if with_unique else 0]
        if with_unique:
            for item in items:
                args += item
        else:
            for job_id, payload, _ in items:
                args += (job_id, payload)
        keys = self.keys
        head = [keys.base, keys.prios, keys.delayed, keys.stats, keys.notify, keys.wake]
        return ScriptCall("enqueue_batch", head, args)


def _rate_args(rate_limit: RateLimit | None) -> list[Arg]:
    """The rate-limit arguments of a reserving script (none: unlimited)."""
    if rate_limit is None:
        return []
    return [rate_limit.interval_ms, rate_limit.tolerance_ms]


def new_request_id() -> str:
    """A random id for one reserve call (16 hex digits): :func:`reserve`'s ``request_id``."""
    return os.urandom(8).hex()


def reserve(
    keys: QueueKeys,
    *,
    lease_ms: int,
    worker_id: str,
    count: int,
    request_id: str,
    group_concurrency: int | None = None,
    rate_limit: RateLimit | None = None,
) -> ScriptCall:
    """``reserve.lua``: reserve up to ``count`` jobs, idempotent per ``request_id``.

    ``group_concurrency``: at most this many running jobs per group (``None``: no cap).
    ``rate_limit``: the queue's (``None``: unlimited); jobs go no faster than that.
    """
    return ScriptCall(
        "reserve",
        [
            keys.base,
            keys.prios,
            keys.reserved,
            keys.stats,
            keys.notify,
            keys.reservation(request_id),
        ],
        [lease_ms, worker_id, count, request_id, group_concurrency or 0, *_rate_args(rate_limit)],
    )


def ack_reserve(
    keys: QueueKeys,
    job_id: str,
    token: int,
    result: str,
    result_ttl: int,
    *,
    lease_ms: int,
    worker_id: str,
    count: int,
    request_id: str,
    group_concurrency: int | None = None,
    rate_limit: RateLimit | None = None,
) -> ScriptCall:
    """``ack_reserve.lua``: ack one job and reserve up to ``count`` more (``group_concurrency``,
    ``rate_limit``: as :func:`reserve`)."""
    return ScriptCall(
        "ack_reserve",
        [
            keys.base,
            keys.job(job_id),
            keys.reserved,
            keys.stats,
            keys.prios,
            keys.notify,
            keys.reservation(request_id),
        ],
        [
            job_id,
            token,
            result,
            result_ttl,
            lease_ms,
            worker_id,
            count,
            request_id,
            group_concurrency or 0,
            *_rate_args(rate_limit),
        ],
    )


def renew(keys: QueueKeys, job_id: str, token: int, lease_ms: int) -> ScriptCall:
    """``renew.lua``: extend a running job's lease."""
    return ScriptCall("renew", [keys.job(job_id), keys.reserved], [job_id, token, lease_ms])


def ack(keys: QueueKeys, job_id: str, token: int, result: str, result_ttl: int) -> ScriptCall:
    """``ack.lua``: record a success."""
    return ScriptCall(
        "ack",
        [keys.base, keys.job(job_id), keys.reserved, keys.stats],
        [job_id, token, result, result_ttl],
    )


def fail(
    keys: QueueKeys,
    job_id: str,
    token: int,
    error: str,
    retry_delay_ms: int,
    retention: Retention,
) -> ScriptCall:
    """``fail.lua``: record a failed attempt (``retry_delay_ms`` -1: no retry); a final
    failure applies ``retention`` to the failed store."""
    return ScriptCall(
        "fail",
        [
            keys.base,
            keys.job(job_id),
            keys.reserved,
            keys.delayed,
            keys.failed,
            keys.stats,
            keys.wake,
        ],
        [job_id, token, error, retry_delay_ms, *retention.args()],
    )


def release(keys: QueueKeys, job_id: str, token: int) -> ScriptCall:
    """``release.lua``: hand a running job back without spending an attempt."""
    return ScriptCall(
        "release",
        [keys.base, keys.job(job_id), keys.reserved, keys.prios, keys.stats, keys.notify],
        [job_id, token],
    )


def cancel_running(keys: QueueKeys, job_id: str, token: int, ttl: int) -> ScriptCall:
    """``cancel_running.lua``: end a running job as cancelled (its worker stopped it)."""
    return ScriptCall(
        "cancel_running",
        [keys.base, keys.job(job_id), keys.reserved, keys.stats],
        [job_id, token, ttl],
    )


def promote(keys: QueueKeys, limit: int) -> ScriptCall:
    """``promote.lua``: queue up to ``limit`` due scheduled jobs."""
    return ScriptCall(
        "promote",
        [keys.base, keys.delayed, keys.prios, keys.stats, keys.notify, keys.wake],
        [limit],
    )


def reclaim(keys: QueueKeys, limit: int, error: str, retention: Retention) -> ScriptCall:
    """``reclaim.lua``: take back up to ``limit`` jobs whose lease expired; applies
    ``retention`` to the failed store when one of them goes there."""
    return ScriptCall(
        "reclaim",
        [keys.base, keys.reserved, keys.prios, keys.failed, keys.stats, keys.notify],
        [limit, error, *retention.args()],
    )


def trim_failed(keys: QueueKeys, retention: Retention) -> ScriptCall:
    """``trim_failed.lua``: apply ``retention`` to the failed store now."""
    return ScriptCall("trim_failed", [keys.base, keys.failed, keys.stats], retention.args())


def retry(keys: QueueKeys, job_id: str) -> ScriptCall:
    """``retry.lua``: re-queue a failed job."""
    return ScriptCall(
        "retry",
        [keys.base, keys.job(job_id), keys.failed, keys.prios, keys.stats, keys.notify],
        [job_id],
    )


def cancel(keys: QueueKeys, job_id: str, mode: CancelMode, ttl: int) -> ScriptCall:
    """``cancel.lua``: cancel (keep the record ``ttl`` s) or delete a job."""
    return ScriptCall(
        "cancel",
        [keys.base, keys.job(job_id), keys.delayed, keys.failed, keys.prios, keys.stats],
        [job_id, mode, ttl],
    )


def run_now(keys: QueueKeys, job_id: str) -> ScriptCall:
    """``run_now.lua``: queue a scheduled job at once."""
    return ScriptCall(
        "run_now",
        [keys.base, keys.job(job_id), keys.delayed, keys.prios, keys.stats, keys.notify],
        [job_id],
    )


def failed_batch(
    keys: QueueKeys, *, mode: FailedBatchMode, limit: int, offset: int, upto_ms: int, name: str
) -> ScriptCall:
    """``failed_batch.lua``: retry or delete one batch of failed jobs."""
    return ScriptCall(
        "failed_batch",
        [keys.base, keys.failed, keys.prios, keys.stats, keys.notify],
        [mode, limit, offset, upto_ms, name],
    )


def empty_queue(keys: QueueKeys, limit: int) -> ScriptCall:
    """``empty_queue.lua``: delete up to ``limit`` of the queue's queued jobs."""
    return ScriptCall("empty_queue", [keys.base, keys.prios, keys.stats, keys.groupfull], [limit])


def schedule_sync(keys: QueueKeys, entries: Iterable[tuple[str, str, int]]) -> ScriptCall:
    """``schedule_sync.lua``: store the queue's periodic entries ``(name, spec, first tick ms)``."""
    args: list[Arg] = []
    for entry in entries:
        args += entry
    return ScriptCall("schedule_sync", [keys.base, keys.schedule], args)


def schedule_due(keys: QueueKeys, limit: int) -> ScriptCall:
    """``schedule_due.lua``: read up to ``limit`` due periodic entries of the queue."""
    return ScriptCall("schedule_due", [keys.schedule], [limit])


def _created(job: NewJob) -> list[Arg]:
    """The ``ARGV`` of ``job`` in the schedule scripts: id, priority, group, unique key and
    TTL, then the field pairs."""
    return [
        job.job_id,
        job.priority,
        job.group,
        job.unique_key,
        job.unique_ttl,
        *pairs(job.fields),
    ]


def schedule_claim(
    keys: QueueKeys, job: NewJob, *, entry: str, tick_ms: int, next_tick_ms: int
) -> ScriptCall:
    """``schedule_claim.lua``: claim the tick ``tick_ms`` of ``entry`` and enqueue ``job``."""
    return ScriptCall(
        "schedule_claim",
        [
            keys.base,
            keys.schedule,
            keys.schedule_entry(entry),
            keys.job(job.job_id),
            keys.prios,
            keys.delayed,
            keys.stats,
            keys.notify,
            keys.wake,
            keys.unique(job.unique_key),
        ],
        [entry, tick_ms, next_tick_ms, *_created(job)],
    )


def schedule_run_now(keys: QueueKeys, job: NewJob, *, entry: str) -> ScriptCall:
    """``schedule_run_now.lua``: enqueue ``job`` for ``entry`` now and record it as its
    latest run."""
    return ScriptCall(
        "schedule_run_now",
        [
            keys.base,
            keys.schedule_entry(entry),
            keys.job(job.job_id),
            keys.prios,
            keys.delayed,
            keys.stats,
            keys.notify,
            keys.wake,
            keys.unique(job.unique_key),
        ],
        _created(job),
    )


def pause(keys: QueueKeys) -> ScriptCall:
    """``pause.lua``: stop the queue from handing out jobs."""
    return ScriptCall("pause", [keys.paused, keys.notify], [])


def resume(keys: QueueKeys) -> ScriptCall:
    """``resume.lua``: let a paused queue hand out jobs again and wake its idle workers."""
    return ScriptCall("resume", [keys.paused, keys.stats, keys.notify], [])


def mark_awaited(keys: QueueKeys, job_id: str) -> ScriptCall:
    """``mark_awaited.lua``: mark a job as awaited and read it."""
    return ScriptCall("mark_awaited", [keys.job(job_id)], [])
