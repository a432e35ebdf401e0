"""Cancelling running jobs (``Job.cancel()``) under a real ``rqueue_work``: the soft stop
(``JobCancelled`` in a sync job, a cancelled coroutine in an async one) and the hard stop
(the child killed after the grace period and replaced); the job ends ``cancelled``, is
not retried, and fires no failure signal."""

from __future__ import annotations

import time

from django_rqueue import JobStatus, get_job
from django_rqueue.engine.keys import QueueKeys
from tests.jobs_app.jobs import (
    fault_async_sleep,
    fault_noop,
    fault_sleep,
    fault_swallow_cancel,
)

from .harness import Faults, alive, wait_until

GRACE = 1.0
#: Seconds from Job.cancel() to the end: the master looks every second (master.cancels.POLL).
SOFT_WITHIN = 1.0 + 2.0


def cancelled(job_id: str) -> bool:
    job = get_job(job_id)
    return job is not None and job.status is JobStatus.CANCELLED


def test_a_sync_job_is_stopped_by_jobcancelled_and_its_child_serves_on(faults: Faults) -> None:
    worker = faults.worker("--queues", "default", "--concurrency", "1", "--without-poller")
    faults.wait_ready(worker)
    long = fault_sleep.delay(faults.ledger, "long", 60)
    start = faults.wait_event("start", tag="long")
    asked = time.monotonic()
    handle = get_job(long.id)
    assert handle is not None
    handle.cancel()
    assert handle.status is JobStatus.RUNNING and handle.cancel_requested_at is not None

    wait_until(lambda: cancelled(long.id), timeout=SOFT_WITHIN + 5, message="not cancelled")
    took = time.monotonic() - asked
    print(f"sync job cancelled {took:.2f} s after Job.cancel()")
    done = get_job(long.id)
    assert done is not None and done.attempts == 1 and done.finished_at is not None
    assert faults.events("end", tag="long") == []  # its sleep never finished
    assert faults.events("retrying") == [] and faults.events("failed") == []
    assert faults.client.zcard(QueueKeys.of("rqueue", "default").reserved) == 0
    # The same child (soft stop: not killed) runs the next job.
    after = fault_noop.delay(faults.ledger, "after")
    assert faults.wait_event("start", tag="after")["pid"] == start["pid"]
    faults.wait_final([after.id])
    assert "outcome=cancelled" in worker.stderr()


def test_a_job_that_swallows_jobcancelled_is_killed_after_the_grace(faults: Faults) -> None:
    worker = faults.worker(
        "--queues", "default", "--concurrency", "1", "--without-poller",
        "--timeout-grace", str(GRACE),
    )  # fmt: skip
    faults.wait_ready(worker)
    stubborn = fault_swallow_cancel.delay(faults.ledger, "stubborn")
    start = faults.wait_event("start", tag="stubborn")
    handle = get_job(stubborn.id)
    assert handle is not None
    handle.cancel()
    faults.wait_event("soft_cancel", tag="stubborn", timeout=SOFT_WITHIN + 5)
    wait_until(lambda: cancelled(stubborn.id), timeout=GRACE + 10, message="not cancelled")
    done = get_job(stubborn.id)
    assert done is not None and done.attempts == 1  # not retried (max_attempts=5)
    wait_until(lambda: not alive(start["pid"]), timeout=5, message="child not killed")
    assert faults.events("retrying") == [] and faults.events("failed") == []
    # A new child replaced the killed one and serves.
    after = fault_noop.delay(faults.ledger, "after")
    assert faults.wait_event("start", tag="after", timeout=15)["pid"] != start["pid"]
    faults.wait_final([after.id])
    assert worker.alive()


def test_cancelling_one_async_job_leaves_the_others_running(faults: Faults) -> None:
    worker = faults.worker(
        "--queues", "default", "--concurrency", "1", "--async-concurrency", "5",
        "--without-poller",
    )  # fmt: skip
    faults.wait_ready(worker)
    jobs = [fault_async_sleep.delay(faults.ledger, f"a{i}", 3) for i in range(3)]
    for i in range(3):
        faults.wait_event("start", tag=f"a{i}")
    handle = get_job(jobs[1].id)
    assert handle is not None
    handle.cancel()
    wait_until(lambda: cancelled(jobs[1].id), timeout=SOFT_WITHIN + 5, message="not cancelled")
    faults.wait_final([jobs[0].id, jobs[2].id], timeout=15)
    states = {j.id: get_job(j.id).status for j in jobs}  # type: ignore[union-attr]
    assert states == {
        jobs[0].id: JobStatus.SUCCEEDED,
        jobs[1].id: JobStatus.CANCELLED,
        jobs[2].id: JobStatus.SUCCEEDED,
    }
    assert faults.events("end", tag="a1") == []
    assert faults.events("retrying") == [] and faults.events("failed") == []
