"""Run the queued jobs in the calling process until the queues are empty: :func:`drain`.

A drain repeats rounds of: queue the scheduled jobs and retries whose time has come and relay
the queues' outboxes (what a poller does: workflow members and ``depends_on`` dependents on
other queues get their inputs), then a burst of an in-process
:class:`~django_rqueue.worker.Worker` (``burst=True``: it runs jobs until none is queued), until
a round finds nothing to run and nothing to move. Jobs that the jobs enqueue run in the same
drain; jobs scheduled for later (a delay, a retry's backoff) do not, and are left
``scheduled``. Re-raising a job's exception in the test is Dramatiq's ``StubBroker.join``
(``fail_fast``) behaviour; Sidekiq's ``drain_all`` runs until the queues are empty the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, NamedTuple

from . import signals
from .conf import get_config
from .engine import commands, run
from .engine.queue_ref import queue_ref
from .job import Job
from .worker.loop import Worker
from .worker.outages import Outages
from .worker.relay import Relay

__all__ = ["DrainError", "Drained", "JobFailure", "drain"]

#: Default bound of :func:`drain`: attempts run before it gives up.
MAX_JOBS = 1000
#: Scheduled jobs queued per script call (the poller's batch).
_BATCH = 500


class DrainError(RuntimeError):
    """The queues were still not empty after ``max_jobs`` attempts (a job that enqueues
    itself, say)."""


class JobFailure(NamedTuple):
    """One failed attempt seen by :func:`drain`."""

    job: Job[Any]
    #: The exception the attempt raised, with its traceback (``__traceback__``).
    exception: BaseException
    #: The traceback as the job record keeps it (a ``str``).
    traceback: str
    #: ``True``: the job failed for good (``job_failed``); ``False``: it waits for a retry.
    final: bool


@dataclasses.dataclass
class Drained:
    """What one :func:`drain` ran."""

    #: Attempts run (each attempt of a job counts).
    attempts: int = 0
    #: The jobs whose attempt succeeded, in the order they ended.
    succeeded: list[Job[Any]] = dataclasses.field(default_factory=list)
    #: The failed attempts, in the order they ended.
    failed: list[JobFailure] = dataclasses.field(default_factory=list)


def drain(
    queues: Sequence[str] | None = None,
    *,
    raise_errors: bool = True,
    max_jobs: int = MAX_JOBS,
) -> Drained:
    """Run the jobs of ``queues`` (declared queue names; default every queue of
    ``RQUEUE["QUEUES"]``) in this process until none is left to run now; return what ran.

    Each attempt runs as in a worker (its signals, retries, results, the workflow that it is
    a member of), against the Redis of ``RQUEUE``. ``raise_errors`` (default): at the first
    attempt that raises, stop after that job and raise its exception here, with its original
    traceback and a note naming the job, its queue and attempt; a job that will be retried
    counts too. With ``raise_errors=False``, failures are only listed in
    :attr:`Drained.failed`.

    Raises:
        DrainError: more than ``max_jobs`` attempts, and the queues are still not empty.
        ValueError: a queue is not declared; ``max_jobs`` < 1.
        Exception: the first exception a job raised (``raise_errors``).
        RedisUnavailable: Redis cannot be reached.
    """
    if max_jobs < 1:
        raise ValueError(f"drain(): max_jobs must be >= 1, got {max_jobs!r}")
    names = list(queues) if queues is not None else list(get_config().queues)
    for name in names:
        queue_ref(name)  # raises ValueError for an undeclared queue
    done = Drained()
    relay = Relay("drain", Outages())
    while True:
        moved = sum(_move(relay, queue) for queue in names)
        worker = Worker(names, burst=True, with_poller=False, max_jobs=max_jobs - done.attempts + 1)
        failure = _Watch(done, worker, stop_on_failure=raise_errors)
        with failure:
            worker.run()
        done.attempts += worker.processed
        if raise_errors and done.failed:
            first = done.failed[0]
            job = first.job
            first.exception.add_note(
                f"raised by job {job.name} ({job.id}) on queue {job.queue!r}, attempt "
                f"{job.attempts} of {job.max_attempts}, run by django_rqueue.testing.drain()"
            )
            raise first.exception
        if done.attempts > max_jobs:
            raise DrainError(
                f"drain(): the queues {names} were not empty after {max_jobs} attempts "
                "(does a job enqueue jobs forever?); pass a larger max_jobs if they are expected"
            )
        if not worker.processed and not moved:
            return done


class _Watch:
    """Connects to the outcome signals while a worker runs: notes each outcome in ``done`` and
    asks the worker to stop after a failed attempt when ``stop_on_failure``."""

    def __init__(self, done: Drained, worker: Worker, *, stop_on_failure: bool) -> None:
        self.done = done
        self.worker = worker
        self.stop_on_failure = stop_on_failure

    def succeeded(self, sender: object, *, job: Job[Any], **kwargs: Any) -> None:
        self.done.succeeded.append(job)

    def retrying(self, sender: object, **kwargs: Any) -> None:
        self._failed(final=False, **kwargs)

    def failed(self, sender: object, **kwargs: Any) -> None:
        self._failed(final=True, **kwargs)

    def _failed(
        self, *, final: bool, job: Job[Any], exception: BaseException, traceback: str, **_: Any
    ) -> None:
        self.done.failed.append(JobFailure(job, exception, traceback, final))
        if self.stop_on_failure:
            self.worker.request_stop()

    def __enter__(self) -> None:
        signals.job_succeeded.connect(self.succeeded, weak=False)
        signals.job_retrying.connect(self.retrying, weak=False)
        signals.job_failed.connect(self.failed, weak=False)

    def __exit__(self, *exc_info: object) -> None:
        signals.job_succeeded.disconnect(self.succeeded)
        signals.job_retrying.disconnect(self.retrying)
        signals.job_failed.disconnect(self.failed)


def _move(relay: Relay, queue: str) -> int:
    """Queue ``queue``'s due scheduled jobs and relay its outbox to the end; return how many
    jobs and entries moved."""
    ref = queue_ref(queue)
    moved = 0
    while True:
        round_ = run.execute(ref.client(), commands.promote_round(ref.keys, _BATCH))
        moved += round_.promoted
        if round_.next_due_ms != 0:  # 0: the batch was full, more are due
            break
    while True:
        relayed = relay.relay(queue)
        moved += relayed.read
        if not relayed.full:
            return moved
