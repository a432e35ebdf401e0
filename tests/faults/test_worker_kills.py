"""The master, a child or a whole worker killed or frozen mid-job: the job still completes once.

Two workers with ``--concurrency 1`` each serve the queue; whichever one takes
the job is the victim, the other one is the survivor that must finish it.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import pytest

from tests.jobs_app.jobs import fault_sleep, fault_sleep_first

from .harness import Faults, WorkerProcess, alive, kill_tree, wait_until

LEASE = 1.0
#: Slack on top of a lease for the survivor's poller to notice and its child to start.
SLACK = 2.0


def owner(workers: list[WorkerProcess], pid: int) -> WorkerProcess:
    """The worker whose child has ``pid``."""
    for worker in workers:
        if pid in worker.children():
            return worker
    raise AssertionError(f"pid {pid} is no worker's child")


def two_workers(faults: Faults) -> list[WorkerProcess]:
    workers = [
        faults.worker("--queues", "default", "--concurrency", "1", lease=LEASE, grace=1)
        for _ in range(2)
    ]
    for worker in workers:
        faults.wait_ready(worker)
    return workers


def test_sigkill_master_mid_job_redelivers_within_one_lease(faults: Faults) -> None:
    workers = two_workers(faults)
    job = fault_sleep_first.delay(faults.ledger, "j", 60)
    first = faults.wait_event("start", tag="j")
    victim = owner(workers, first["pid"])
    survivor = next(w for w in workers if w is not victim)

    killed_at = time.monotonic()
    os.kill(victim.pid, signal.SIGKILL)  # the master only: the child must follow it
    wait_until(lambda: not alive(first["pid"]), timeout=1.5, message="orphaned child lives on")
    print(f"orphan gone {time.monotonic() - killed_at:.2f} s after the master")

    second = faults.wait_event("start", tag="j", count=2, timeout=LEASE + SLACK + 1)
    print(f"re-delivered {time.monotonic() - killed_at:.2f} s after the kill (lease {LEASE} s)")
    assert second["attempt"] == 2 and second["token"] > first["token"]
    assert second["pid"] in survivor.children()
    report = faults.wait_and_check([job.id], timeout=10)
    assert report.states[job.id] == "succeeded"
    assert report.starts[job.id] == 2
    assert report.jobs[job.id]["attempts"] == "2"
    assert "lease expired" in report.errors(job.id)[0]["message"]
    assert survivor.alive()


def test_sigkill_child_mid_job_fails_attempt_retries_and_replaces_child(faults: Faults) -> None:
    worker = faults.worker("--queues", "default", "--concurrency", "1", lease=LEASE, grace=1)
    faults.wait_ready(worker)
    job = fault_sleep_first.delay(faults.ledger, "j", 60)
    first = faults.wait_event("start", tag="j")

    os.kill(first["pid"], signal.SIGKILL)

    second = faults.wait_event("start", tag="j", count=2, timeout=5)
    assert second["attempt"] == 2
    assert second["pid"] != first["pid"]
    assert second["pid"] in worker.children()
    report = faults.wait_and_check([job.id], timeout=10)
    assert report.states[job.id] == "succeeded"
    assert report.starts[job.id] == 2
    error = report.errors(job.id)[0]
    assert "worker process died (signal 9, SIGKILL)" in error["message"], error
    # The master failed the attempt itself (no lease expiry involved).
    assert faults.events("retrying", tag="j")[0]["pid"] == worker.pid
    assert worker.alive()


def freeze_owner_until_taken_over(
    faults: Faults, workers: list[WorkerProcess], tag: str
) -> tuple[WorkerProcess, WorkerProcess, dict[str, Any], dict[str, Any]]:
    """SIGSTOP the worker running ``tag`` until the other one starts it; then SIGCONT."""
    first = faults.wait_event("start", tag=tag)
    victim = owner(workers, first["pid"])
    survivor = next(w for w in workers if w is not victim)
    kill_tree(victim.pid, signal.SIGSTOP)  # master, job child and poller child all frozen
    try:
        second = faults.wait_event("start", tag=tag, count=2, timeout=LEASE + SLACK + 1)
    finally:
        kill_tree(victim.pid, signal.SIGCONT)
    assert second["pid"] in survivor.children()
    assert second["token"] > first["token"]
    return victim, survivor, first, second


@pytest.mark.slow
def test_frozen_worker_resumed_kills_its_stale_run(faults: Faults) -> None:
    workers = two_workers(faults)
    job = fault_sleep_first.delay(faults.ledger, "j", 60)  # only the first attempt is long
    victim, survivor, first, second = freeze_owner_until_taken_over(faults, workers, "j")

    # On its first renewal after SIGCONT the master finds the token moved on
    # and kills the stale run instead of letting it run beside the new one.
    wait_until(lambda: not alive(first["pid"]), timeout=LEASE + 2, message="stale run lives on")
    assert "lease lost" in victim.stderr()
    report = faults.wait_and_check([job.id], timeout=10)
    assert report.states[job.id] == "succeeded"
    assert [e["token"] for e in faults.events("end", tag="j")] == [second["token"]]
    assert [a["token"] for a in faults.events("acked", tag="j")] == [second["token"]]
    assert victim.alive() and survivor.alive()
    wait_until(lambda: len(victim.children()) == 2, timeout=5, message="child not replaced")


@pytest.mark.slow
def test_frozen_worker_resumed_has_its_late_ack_rejected(faults: Faults) -> None:
    workers = two_workers(faults)
    job = fault_sleep.delay(faults.ledger, "j", 2.5)
    victim, survivor, first, second = freeze_owner_until_taken_over(faults, workers, "j")

    # The stale run may be past its sleep when it resumes: it then reports at
    # once (rejected, run discarded) unless its master killed it first.
    wait_until(
        lambda: "discarding this run" in victim.stderr() or not alive(first["pid"]),
        timeout=LEASE + 2,
        message="the stale run was neither rejected nor killed",
    )
    report = faults.wait_and_check([job.id], timeout=10)
    assert report.states[job.id] == "succeeded"
    acked = faults.events("acked", tag="j")
    assert [a["token"] for a in acked] == [second["token"]]
    assert victim.alive() and survivor.alive()
