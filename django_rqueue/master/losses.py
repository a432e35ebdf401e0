"""What a dead child leaves: the master fails or cancels its running jobs' attempts on its
behalf, hands its other jobs back, and retries the reports Redis could not take.

A child that dies mid-job has the attempts of the jobs it ran failed with
"worker process died (signal/exit code)", or "hard timeout after N s" for the
jobs it was killed for; a job whose cancel was asked ends ``cancelled``; the
jobs it held ahead, and the running ones of a child killed for another job or
at shutdown, go back to their queue without spending an attempt. Signals
(``job_retrying``/``job_failed``) for these attempts are sent from the master,
the only process left.
"""

from __future__ import annotations

import logging
import os
import signal

from ..exceptions import JobCancelled, JobTimeout, RedisUnavailable, WorkerLost
from ..worker.hooks import AttemptOutcome
from ..worker.reporting import cancel_lost_attempt, fail_lost_attempt, hand_back
from .children import Child, ChildJob, KillReason

logger = logging.getLogger("django_rqueue.supervisor")


class Losses:
    """The reports on dead children's behalf, and those waiting for Redis to answer."""

    def __init__(self) -> None:
        #: Reports Redis could not take yet, oldest first: retried by :meth:`retry`.
        self.pending: list[tuple[ChildJob, BaseException]] = []
        #: Attempts failed for good on a dead child's behalf.
        self.failed = 0

    def settle(self, child: Child, status: int) -> None:
        """Report what ``child``, exited with wait status ``status``, left; empty its records."""
        for prefetched in child.prefetched.values():  # never started: no attempt spent
            hand_back(prefetched.queue, prefetched.job_id, prefetched.token)
        child.prefetched.clear()
        for running in child.running.values():
            if running.job_id in child.cancelling:  # its cancel was asked: no retry
                self._fail(running, JobCancelled(cancel_reason(child, status)))
            elif child.killed_for is None or running.job_id in child.culprits:
                self._fail(running, death_reason(child, status, running))
            else:  # killed for another job, or at shutdown: no attempt spent
                hand_back(running.queue, running.job_id, running.token)
        child.running.clear()

    def retry(self) -> None:
        """Send the reports Redis could not take, oldest first.

        Raises:
            RedisUnavailable: still unreachable (that report and the later ones wait).
        """
        pending, self.pending = self.pending, []
        for index, (running, exc) in enumerate(pending):
            try:
                self._report(running, exc)
            except RedisUnavailable:
                self.pending.extend(pending[index:])
                raise

    def _fail(self, running: ChildJob, exc: BaseException) -> None:
        try:
            self._report(running, exc)
        except RedisUnavailable as error:
            logger.warning("cannot report %s yet (%s); will retry", running.job_id, error)
            self.pending.append((running, exc))

    def _report(self, running: ChildJob, exc: BaseException) -> None:
        if isinstance(exc, JobCancelled):
            cancel_lost_attempt(running.queue, running.job_id, running.token, str(exc))
            return
        reported = fail_lost_attempt(running.queue, running.job_id, running.token, exc)
        if reported is AttemptOutcome.FAILED:
            self.failed += 1


def cancel_reason(child: Child, status: int) -> str:
    """Why a job whose cancel was asked ended with ``child`` (wait status ``status``)."""
    if child.killed_for is KillReason.CANCEL:
        return "cancelled: killed after the grace period"
    return f"cancelled: the worker process ended meanwhile (status {status})"


def death_reason(child: Child, status: int, running: ChildJob) -> BaseException:
    """The error an attempt of ``running`` fails with, ``child`` having exited with ``status``."""
    if child.killed_for is KillReason.TIMEOUT:
        return JobTimeout(f"hard timeout after {child.culprits[running.job_id]:.0f} s")
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return WorkerLost(f"worker process died (signal {sig}, {signal.Signals(sig).name})")
    return WorkerLost(f"worker process died (exit code {os.WEXITSTATUS(status)})")
