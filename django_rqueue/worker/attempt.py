"""One attempt of a reserved job in a worker, from its start to its report and log line.

:class:`AttemptSteps` are the steps every attempt goes through, a sync job's
here or an async one's on the event loop (:mod:`~.async_runner`): its lease
renewed from a thread of this process while it runs (in-process only: under
``rqueue_work`` the master renews it), its retry delay decided
(:func:`~django_rqueue.execution.next_delay`: none for a cancelled job or a
corrupt record), and, once reported, the master told it ended and its signal
and log line (:func:`~.reporting.conclude`).

:class:`AttemptLifecycle` runs a sync job, one at a time, in this thread: the
job's soft ``timeout`` is a SIGALRM timer that raises
:class:`~django_rqueue.exceptions.JobTimeout` in its code (main thread only),
and a cancel from the master (``SIGUSR2`` and the cancel pipe,
:mod:`~.cancelling`) raises :class:`~django_rqueue.exceptions.JobCancelled`
there, or, when it comes before the job's code starts, keeps it from
starting. It then reports the attempt, fenced by the job's token, in one of
three ways:

- a success while more jobs of a batch are held (under a supervisor, no
  ``job_succeeded`` receivers to run after the ack): the ack is sent without
  waiting for its reply (:class:`~django_rqueue.engine.pipelining.AckStream`),
  whose replies are read with the next round trip;
- a success of the first queue (weighted: of the queue the next draw picks
  again) with nothing held, unless the worker is stopping or about to
  recycle: the ack and the next reservation in one round trip
  (``ack_reserve.lua``, as BullMQ's ``moveToFinished`` fetches the next job).
  Under a supervisor the master is told about that next job at once, so it
  renews its lease while the previous job's ``job_succeeded`` receivers run
  (and counts that time against its hard timeout if they hang); an
  unsupervised worker reserves that way only when ``job_succeeded`` has no
  receivers;
- otherwise a plain ack, or a failure (retried, or final), retried while
  Redis is unreachable (:mod:`~.reporting`).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any

from django.db import close_old_connections

from .. import registry
from ..conf import get_config
from ..conf.defaults import MAX_JSON_BYTES
from ..encryption import seal
from ..engine.pipelining import AckStream, PendingAck
from ..engine.queue_ref import queue_ref
from ..exceptions import JobCancelled, JobTimeout, LeaseLost, RedisUnavailable, UnknownJob
from ..execution import AttemptResult, failure, next_delay, run_attempt, soft_timeout
from ..job import Job
from ..types import JobSpec
from . import cancelling
from .hooks import AttemptOutcome, WorkerHooks
from .lease import LeaseKeeper
from .limits import Limits
from .prefetch import Prefetched
from .reporting import (
    conclude,
    deliver_ack,
    deliver_cancel,
    deliver_failure,
    deliver_outcome,
)
from .reserving import Reserver

logger = logging.getLogger("django_rqueue.worker")


class AttemptSteps:
    """The steps of an attempt that a sync job and an async one share (module docstring).

    ``hooks``: a supervised child's pipe to its master (``None``: none).
    ``renew_leases``: renew each running job's lease from a thread of this process.
    """

    def __init__(self, hooks: WorkerHooks | None, *, renew_leases: bool) -> None:
        self.hooks = hooks
        self.renew_leases = renew_leases

    @contextlib.contextmanager
    def leased(self, queue: str, job: Job[Any]) -> Iterator[None]:
        """While the block runs, ``job``'s lease is renewed from a thread (``renew_leases``)."""
        if not self.renew_leases:
            yield
            return
        keeper = LeaseKeeper(queue, job.id, job.token, get_config().lease)
        keeper.start()
        try:
            yield
        finally:
            keeper.done.set()

    @staticmethod
    def settle(
        job_function: JobSpec | None, job: Job[Any], attempt: AttemptResult
    ) -> tuple[AttemptResult, float | None]:
        """``attempt`` with :func:`~django_rqueue.execution.next_delay`'s note applied, and the
        seconds before the next attempt (``None``: none). A corrupt record cannot be repaired
        by running it again, and a cancelled job is not retried: no delay for either."""
        if job.problems or isinstance(attempt.exception, JobCancelled):
            return attempt, None
        if job.dependents is not None and attempt.ok:  # a plain job pays this check only
            attempt = bounded_for_dependents(job, attempt)
        delay, note = next_delay(job_function, job, attempt)
        return attempt.noted(note), delay

    @staticmethod
    def deliver(
        queue: str, job: Job[Any], attempt: AttemptResult, delay: float | None
    ) -> AttemptOutcome:
        """Report ``attempt`` of ``job`` (blocking): ended as cancelled, acked, or failed
        (``delay``: seconds before the retry; ``None``: final)."""
        if isinstance(attempt.exception, JobCancelled):
            return deliver_cancel(queue, job)
        return deliver_outcome(queue, job, attempt, delay)

    def finished(self, job: Job[Any], reported: AttemptOutcome) -> None:
        """The attempt of ``job`` is reported: tell the master (a supervised child).

        Then comes :func:`~.reporting.conclude` (or ``aconclude``): its signal and log line.
        """
        if self.hooks is not None:
            self.hooks.finished(job, reported)


class AttemptLifecycle(AttemptSteps):
    """Runs a worker's sync jobs, one at a time in this thread, and reports each
    (module docstring).

    It shares with the worker's loop its :class:`~.reserving.Reserver` (an ack may
    reserve the next jobs), the jobs it holds (``prefetched``), its :class:`~.limits.Limits`
    and its cancel pipe (``cancel_fd``, or ``None``).
    """

    def __init__(
        self,
        reserver: Reserver,
        prefetched: Prefetched,
        hooks: WorkerHooks | None,
        limits: Limits,
        cancel_fd: int | None,
        *,
        renew_leases: bool,
    ) -> None:
        super().__init__(hooks, renew_leases=renew_leases)
        self.reserver = reserver
        self.prefetched = prefetched
        self.limits = limits
        self.cancel_fd = cancel_fd
        #: The sync job this process runs, for the cancel signal to match (``None``: none).
        self._cancel_target: str | None = None
        #: Whether the job's own code runs now (a cancel then raises in it).
        self._in_job = False
        #: A cancel of :attr:`_cancel_target` arrived before its code started.
        self._cancel_asked = False
        #: Acks of the current batch sent without waiting (one connection, one queue's).
        self._acks: AckStream | None = None

    def on_cancel_signal(self, signum: int, frame: FrameType | None) -> None:
        """SIGUSR2 from the master: stop the sync job it names in the cancel pipe.

        Raises :class:`JobCancelled` in the job's code when it runs now; before it
        starts, marks it so that it does not start. With no sync job running
        (an async session reads the pipe itself), leaves the pipe alone.
        """
        target, fd = self._cancel_target, self.cancel_fd
        if target is None or fd is None:
            return
        if target not in cancelling.read_requests(fd):
            return  # a late request for a job that already ended
        if self._in_job:
            self._in_job = False
            raise JobCancelled(f"job {target} was cancelled while it ran")
        self._cancel_asked = True

    def run(self, queue: str, job: Job[Any]) -> None:
        """Run one reserved job of ``queue`` and report its outcome, fenced by its token."""
        started = time.monotonic()
        self._cancel_target, self._cancel_asked = job.id, False
        if self.hooks is not None:
            self.hooks.started(queue, job)
        job_function: JobSpec | None = None
        with self.leased(queue, job):
            try:
                try:
                    job_function = registry.resolve(job)
                except UnknownJob as unknown:
                    attempt = failure(unknown)
                else:
                    attempt = self._execute(job_function, job)
            finally:
                self._cancel_target = None
        ran = time.monotonic() - started
        attempt, delay = self.settle(job_function, job, attempt)
        first = self.reserver.ran(queue, ran, job_function)
        limits = self.limits
        prefetch = (
            attempt.ok
            and first
            and not limits.stopping
            and (self.hooks is not None or self.reserver.quiet[queue])
            and limits.exit_reason(limits.processed + 1) is None
        )
        if isinstance(attempt.exception, JobCancelled):
            self.collect_acks()
            reported = deliver_cancel(queue, job)
        else:
            reported = self.report(queue, job, attempt, delay, prefetch=prefetch)
        self.finished(job, reported)
        conclude(job_function, job, queue, attempt, reported, delay, duration=ran)

    def _execute(self, job_function: JobSpec, job: Job[Any]) -> AttemptResult:
        if job.problems:
            return failure(ValueError(f"job record is corrupt: {'; '.join(job.problems)}"))
        close_old_connections()
        timer = job.timeout > 0 and threading.current_thread() is threading.main_thread()
        if timer:
            previous = signal.signal(signal.SIGALRM, _raise_timeout(job.timeout))
            signal.setitimer(signal.ITIMER_REAL, job.timeout)
        try:
            if self._cancel_asked:
                return failure(JobCancelled(f"job {job.id} was cancelled before it started"))
            self._in_job = True
            return run_attempt(job_function, job)
        except (JobTimeout, JobCancelled) as exc:  # fired after the job returned
            return failure(exc)
        finally:
            self._in_job = False
            if timer:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)
            close_old_connections()

    def report(
        self,
        queue: str,
        job: Job[Any],
        attempt: AttemptResult,
        delay: float | None,
        *,
        prefetch: bool,
    ) -> AttemptOutcome:
        """Deliver ack/fail, retrying while Redis is unreachable; return the outcome.

        ``prefetch``: a success of a queue that may lead a fetch. With more
        jobs of a batch still to run (and no ``job_succeeded`` receivers to
        run after the ack), send the ack without waiting for its reply;
        otherwise ack it with ``ack_reserve.lua`` and keep the jobs it
        reserves (a batch when :meth:`~.reserving.Reserver.batch_size` allows, as many as
        :meth:`~.weights.QueueOrder.continue_with` says) for the worker's next
        :meth:`~.loop.Worker.work_once` calls.
        """
        ref = queue_ref(queue)
        result = seal(attempt.result_json or "null")  # RQUEUE["ENCRYPTION_KEYS"]
        ack = PendingAck(queue, ref.keys, job.id, job.token, result, job.result_ttl)
        reserver = self.reserver
        if prefetch and self.prefetched and reserver.quiet[queue] and self.hooks is not None:
            client = ref.client()
            if self._acks is not None and self._acks.wire.client is not client:
                self.collect_acks()  # another queue's Redis: one stream per connection
                self._acks.close()
                self._acks = None
            if self._acks is None:
                self._acks = AckStream(client)
            self._acks.send(ack)
            # A refusal (stale token) is logged when the reply is read.
            return AttemptOutcome.SUCCEEDED
        self.collect_acks()
        count = 0
        # A queue before its next slot would hand out nothing: a plain ack.
        if (
            attempt.ok
            and prefetch
            and not self.prefetched
            and not reserver.next_slots.limited(queue)
        ):
            count = reserver.order.continue_with(queue, reserver.batch_size(queue))
        if count:
            reserved_at = time.monotonic()  # before the request (see prefetch.py)
            try:
                stale, reserved = reserver.ack_and_reserve(queue, job, result, count)
            except RedisUnavailable:
                pass  # sent again for RESEND_PATIENCE s already; a plain ack reserves nothing
            else:
                jobs = [Job.from_fields(*r) for r in reserved.jobs]
                self.prefetched.add(queue, jobs, since=reserved_at)
                if stale is not None:
                    logger.error("%s; discarding this run", stale)
                    return AttemptOutcome.DISCARDED
                return AttemptOutcome.SUCCEEDED
        if attempt.ok:
            return deliver_ack(ack)
        return deliver_failure(queue, job, attempt, delay)

    def collect_acks(self) -> None:
        """Read the replies of the acks sent without waiting; resend the unknown ones."""
        if self._acks is None or not self._acks.owed:
            return
        for ack, verdict in self._acks.collect():
            if isinstance(verdict, LeaseLost):
                logger.error("%s; its run was discarded", verdict)
            elif verdict is not True:  # resent synchronously (idempotent under the token)
                if verdict is None:  # False: Redis had lost its scripts; nothing ran
                    logger.warning(
                        "worker %s: no reply to the ack of %s; sending it again",
                        self.reserver.worker_id,
                        ack.job_id,
                    )
                deliver_ack(ack)


def bounded_for_dependents(job: Job[Any], attempt: AttemptResult) -> AttemptResult:
    """``attempt`` (a success), or a failure with a :class:`ValueError` naming the limit when
    its result (JSON, bytes) is larger than ``RQUEUE["MAX_PAYLOAD_BYTES"]`` (unset: the most
    a worker decodes, :data:`~django_rqueue.conf.defaults.MAX_JSON_BYTES`) and ``job`` has
    a dependent that gets a copy of it (an edge with copy ``p``): the copy would go into
    each such dependent's record. A count-only dependent (copy ``c``) copies nothing.
    Dependents linked later (``depends_on`` on a job that exists: the ``+`` entry) are not
    known here and are not counted."""
    dependents, result = job.dependents, attempt.result_json
    if dependents is None or result is None:
        return attempt
    limit = get_config().max_payload_bytes or MAX_JSON_BYTES
    if len(result) <= limit or not any(edge.copy == "p" for edge in dependents.edges):
        return attempt
    return failure(
        ValueError(
            f"the result of {job.name} takes {len(result)} bytes as JSON, more than "
            f"RQUEUE['MAX_PAYLOAD_BYTES'] ({limit}), and is copied into the jobs that depend "
            "on it: store the data elsewhere and return its key"
        )
    )


def _raise_timeout(seconds: float) -> Any:  # a signal handler
    def handler(signum: int, frame: FrameType | None) -> None:
        raise soft_timeout(seconds)

    return handler
