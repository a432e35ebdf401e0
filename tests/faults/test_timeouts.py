"""Every kind of overrunning job ends within timeout + grace, its attempt failed with the reason.

Four jobs with ``timeout=1`` (and ``max_attempts=1``) run side by side in one
worker with ``--timeout-grace 1``: a pure-Python loop and a long sleep get the
soft timeout (``JobTimeout`` raised in the job at 1 s); a long C call (the
soft timeout cannot interrupt it) and a job that swallows ``JobTimeout`` are
SIGKILLed by the master at 1 + 1 s. Each attempt is failed with its reason,
the master lives on and replaces the killed children.
"""

from __future__ import annotations

from tests.jobs_app.jobs import (
    fault_c_call,
    fault_sleep_forever,
    fault_spin,
    fault_swallow_timeout,
)

from .harness import Faults, alive, wait_until

TIMEOUT = 1.0  # the jobs' own timeout (see tests/jobs_app/jobs.py)
GRACE = 1.0
#: Scheduling slack on a loaded 2-core machine (a busy-looping job shares a core).
SLACK = 1.5


def test_overrunning_jobs_are_stopped_within_timeout_plus_grace(faults: Faults) -> None:
    worker = faults.worker(
        "--queues", "default", "--concurrency", "4", "--timeout-grace", str(GRACE), lease=1
    )
    faults.wait_ready(worker)
    jobs = {
        "spin": fault_spin.delay(faults.ledger, "spin"),
        "sleep": fault_sleep_forever.delay(faults.ledger, "sleep"),
        "c_call": fault_c_call.delay(faults.ledger, "c_call"),
        "swallow": fault_swallow_timeout.delay(faults.ledger, "swallow"),
    }
    ids = [j.id for j in jobs.values()]
    report = faults.wait_and_check(ids, timeout=TIMEOUT + GRACE + 10)

    soft = "job exceeded its timeout of 1 s"
    hard = "hard timeout after 2 s"
    expected = {"spin": soft, "sleep": soft, "c_call": hard, "swallow": hard}
    for tag, reason in expected.items():
        job_id = jobs[tag].id
        assert report.states[job_id] == "failed"
        assert report.starts[job_id] == 1
        [error] = report.errors(job_id)
        assert reason in error["message"], (tag, error)
        start = faults.events("start", tag=tag)[0]
        failed = faults.events("failed", tag=tag)[0]
        took = failed["t"] - start["t"]
        print(f"{tag}: attempt failed {took:.2f} s after it started ({error['message']})")
        assert took < TIMEOUT + GRACE + SLACK, (tag, took)
        if reason == hard:
            # Killed by the master, which reported the attempt; the child is gone.
            assert failed["pid"] == worker.pid
            assert not alive(start["pid"])
        else:
            # The job's own child reported it and lives on.
            assert failed["pid"] == start["pid"]

    assert faults.events("soft_timeout", tag="swallow"), "the soft timeout was not raised"
    assert worker.alive()
    # The two killed children were replaced: 4 worker children + the poller child.
    wait_until(lambda: len(worker.children()) == 5, timeout=5, message="children not replaced")
