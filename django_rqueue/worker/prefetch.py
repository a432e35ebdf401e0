"""Jobs a worker reserved ahead of running them, and the check that they are still its own.

A worker reserves ahead in two ways: ``ack_reserve.lua`` reserves the next
job together with the previous one's ack, and a batch reservation reserves up
to :data:`~.loop.MAX_BATCH` jobs at once. The jobs after the first wait here,
in order; under a supervisor the master renews their leases from the moment
it hears of them (:meth:`~.loop.WorkerHooks.prefetched`).

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
from typing import TYPE_CHECKING, Any

from ..conf import get_config
from ..engine import transitions
from ..engine.connection import get_client
from ..engine.keys import QueueKeys
from ..exceptions import LeaseLost, RedisUnavailable
from ..job import Job
from .reporting import AttemptOutcome, hand_back

if TYPE_CHECKING:
    from .loop import WorkerHooks

logger = logging.getLogger("django_rqueue.worker")


def still_ours(queue: str, job: Job[Any], since: float) -> None:
    """Check that ``job``, reserved by a request sent at ``since`` (``time.monotonic()``),
    still holds its lease: free under a third of the lease, else one renewal.

    Raises:
        LeaseLost: the job is no longer ours: do not run it.
        RedisUnavailable: it could not be checked.
    """
    lease = get_config().lease
    if time.monotonic() - since < lease / 3:
        return
    keys = QueueKeys.of(get_config().key_prefix, queue)
    transitions.renew_lease(get_client(queue), keys, job.id, job.token, int(lease * 1000))


class Prefetched:
    """The jobs reserved ahead, ``(queue, job)`` in the order they run; true while any wait.

    ``hooks`` (a supervised child's pipe to its master) hears of every job
    held, and of every held job that ends without running (``released``).
    """

    def __init__(self, worker_id: str, hooks: WorkerHooks | None) -> None:
        self.worker_id = worker_id
        self.hooks = hooks
        self.jobs: deque[tuple[str, Job[Any]]] = deque()
        #: When the request that reserved the waiting jobs was sent (``time.monotonic()``).
        self.since = 0.0

    def __bool__(self) -> bool:
        return bool(self.jobs)

    def __iter__(self) -> Iterator[tuple[str, Job[Any]]]:
        return iter(self.jobs)

    def add(self, queue: str, jobs: list[Job[Any]], since: float | None = None) -> None:
        """Keep ``jobs`` to run next; ``since``: when their request was sent (default now)."""
        if not jobs:
            return
        self.jobs.extend((queue, job) for job in jobs)
        self.since = time.monotonic() if since is None else since
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
            queue, job = self.jobs.popleft()
            try:
                still_ours(queue, job, self.since)
            except LeaseLost as exc:
                logger.warning("worker %s: %s; skipping it", self.worker_id, exc)
                if self.hooks is not None:
                    self.hooks.finished(job, AttemptOutcome.RELEASED)
                continue
            except RedisUnavailable:
                self.jobs.appendleft((queue, job))  # still held: tried again after the backoff
                raise
            return queue, job
        return None

    def first_may_run(self, queue: str, job: Job[Any], since: float) -> bool:
        """Whether the first job of a reservation requested at ``since`` may run now.

        Nobody was told about it yet (unlike a held job), so a lost one is just
        dropped. If the check cannot be made it is held like the rest of its
        batch and checked again after the backoff.

        Raises:
            RedisUnavailable: the check could not be made (the job is held).
        """
        try:
            still_ours(queue, job, since)
        except LeaseLost as exc:
            logger.warning(
                "worker %s: %s (reserved %.1f s ago); skipping it",
                self.worker_id,
                exc,
                time.monotonic() - since,
            )
            return False
        except RedisUnavailable:
            self.jobs.appendleft((queue, job))
            self.since = since
            if self.hooks is not None:
                self.hooks.prefetched(queue, [job])
            raise
        return True

    def hand_back_all(self) -> None:
        """Give back every waiting job without spending an attempt (the worker stops)."""
        while self.jobs:
            queue, job = self.jobs.popleft()
            hand_back(queue, job.id, job.token)
            if self.hooks is not None:
                self.hooks.finished(job, AttemptOutcome.RELEASED)
