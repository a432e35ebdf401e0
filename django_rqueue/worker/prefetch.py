"""Jobs a worker reserved ahead of running them, and the check that they are still its own.

A worker reserves ahead in two ways: ``ack_reserve.lua`` reserves the next
job together with the previous one's ack, and a batch reservation reserves up
to :data:`~.reserving.MAX_BATCH` jobs at once. The jobs after the first wait here,
in order; under a supervisor the master renews their leases from the moment
it hears of them (:meth:`~.hooks.WorkerHooks.prefetched`).

Batches: while the jobs of the first queue (weighted: of the queue picked)
are short and nobody listens to ``job_succeeded`` for them, the worker
reserves up to :data:`~.reserving.MAX_BATCH` jobs per round trip (as many as fit in
:data:`~.reserving.BATCH_BUDGET` seconds of work at the average run time seen so far;
one while that is unknown), each with its own lease and fencing token, and
sends each job's ack the moment it returns without waiting for the reply
(:class:`~django_rqueue.engine.pipelining.AckStream`); the replies are read
with the next batch's round trip. A job's success is recorded as promptly as
with one ack per round trip; the price is that a job reserved in a batch
waits for the ones before it (at most about :data:`~.reserving.BATCH_BUDGET` seconds
when they run as long as the ones before). Celery's and Dramatiq's workers
prefetch for the same reason (``worker_prefetch_multiplier``, ``prefetch``).

A job's lease starts when Redis runs the reserving call, which may be well
before the worker gets to run it (a long job before it, a late reply, a
paused process). So the time is taken *before* the request is sent, and a job
is run without a second look only while less than a third of the lease has
passed since then: its lease then has at least two thirds left, and the first
renewal is due in one third. Later, one renewal confirms the lease is still
the worker's (and extends it), or shows that the job was reclaimed, maybe to
run elsewhere, and must not run here.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterator
from typing import Any

from ..conf import get_config
from ..engine import commands, run
from ..engine.queue_ref import queue_ref
from ..exceptions import LeaseLost, RedisUnavailable
from ..job import Job
from .hooks import AttemptOutcome, WorkerHooks
from .reporting import hand_back

logger = logging.getLogger("django_rqueue.worker")


def fresh(since: float) -> bool:
    """Whether a reservation whose request was sent at ``since`` (``time.monotonic()``) may
    run without a second look: less than a third of the lease has passed since then."""
    return time.monotonic() - since < get_config().lease / 3


def still_ours(queue: str, job: Job[Any], since: float) -> None:
    """Check that ``job``, reserved by a request sent at ``since`` (``time.monotonic()``),
    still holds its lease: free while :func:`fresh`, else one renewal.

    Raises:
        LeaseLost: the job is no longer ours: do not run it.
        RedisUnavailable: it could not be checked.
    """
    if fresh(since):
        return
    ref = queue_ref(queue)
    run.execute(ref.client(), commands.renew(ref.keys, job.id, job.token, ref.lease_ms))


class Prefetched:
    """The jobs reserved ahead, ``(queue, job)`` in the order they run; true while any wait.

    Each job keeps when the request that reserved it was sent, and is checked
    against that time (:func:`still_ours`) before it runs. ``hooks`` (a
    supervised child's pipe to its master) hears of every job held, and of
    every held job that ends without running (``released``).
    """

    def __init__(self, worker_id: str, hooks: WorkerHooks | None) -> None:
        self.worker_id = worker_id
        self.hooks = hooks
        #: ``(queue, job, when its reserving request was sent)``, in the order they run.
        self.jobs: deque[tuple[str, Job[Any], float]] = deque()

    def __bool__(self) -> bool:
        return bool(self.jobs)

    def __iter__(self) -> Iterator[tuple[str, Job[Any]]]:
        return ((queue, job) for queue, job, _ in self.jobs)

    def add(self, queue: str, jobs: list[Job[Any]], *, since: float) -> None:
        """Keep ``jobs`` to run next; ``since``: when their reserving request was sent
        (``time.monotonic()``)."""
        if not jobs:
            return
        self.jobs.extend((queue, job, since) for job in jobs)
        if self.hooks is not None:
            self.hooks.prefetched(queue, jobs)

    def peek(self) -> Job[Any] | None:
        """The job :meth:`next` would try first, left in line; ``None`` when none waits."""
        return self.jobs[0][1] if self.jobs else None

    def next(self) -> tuple[str, Job[Any]] | None:
        """Take the next waiting job that is still ours; ``None`` when none waits.

        One whose lease was lost is dropped (the master hears ``released``).

        Raises:
            RedisUnavailable: the check could not be made; the job stays first in line.
        """
        while self.jobs:
            queue, job, since = self.jobs.popleft()
            try:
                still_ours(queue, job, since)
            except LeaseLost as exc:
                logger.warning("worker %s: %s; skipping it", self.worker_id, exc)
                if self.hooks is not None:
                    self.hooks.finished(job, AttemptOutcome.RELEASED)
                continue
            except RedisUnavailable:
                self.jobs.appendleft(
                    (queue, job, since)
                )  # still held: tried again after the backoff
                raise
            return queue, job
        return None

    def may_start(self, queue: str, jobs: list[Job[Any]], since: float) -> list[Job[Any]]:
        """Of ``jobs``, just reserved by a request sent at ``since``, the ones that may start
        now, in order; each is checked with :func:`still_ours` (free while :func:`fresh`).

        Nobody was told about them yet (unlike held jobs), so a lost one is just
        dropped. If a check cannot be made, that job and the ones after it are
        held like the rest of a batch and checked again after the backoff.

        Raises:
            RedisUnavailable: a check could not be made (those jobs are held).
        """
        runnable: list[Job[Any]] = []
        for index, job in enumerate(jobs):
            try:
                still_ours(queue, job, since)
            except LeaseLost as exc:
                logger.warning(
                    "worker %s: %s (reserved %.1f s ago); skipping it",
                    self.worker_id,
                    exc,
                    time.monotonic() - since,
                )
                continue
            except RedisUnavailable:
                held = [(queue, j, since) for j in jobs[index:]]
                self.jobs.extendleft(reversed(held))
                if self.hooks is not None:
                    self.hooks.prefetched(queue, jobs[index:])
                raise
            runnable.append(job)
        return runnable

    def first_may_run(self, queue: str, job: Job[Any], since: float) -> bool:
        """Whether the first job of a reservation requested at ``since`` may run now
        (:meth:`may_start`; the rest of its batch is held already).

        Raises:
            RedisUnavailable: the check could not be made (the job is held).
        """
        return bool(self.may_start(queue, [job], since))

    def hand_back_all(self) -> None:
        """Give back every waiting job without spending an attempt (the worker stops)."""
        while self.jobs:
            queue, job, _ = self.jobs.popleft()
            hand_back(queue, job.id, job.token)
            if self.hooks is not None:
                self.hooks.finished(job, AttemptOutcome.RELEASED)
