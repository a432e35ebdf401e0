"""Processes a job starts end with it: at its hard-timeout kill, and when its worker exits.

A child leads its own process group; the master kills that group on a hard
timeout and, when a child exits, whatever is left of it (before reaping the
child, so the group's id cannot have been reused). A process that leaves the
group on purpose (``setsid``) is out of reach: systemd's ``KillMode`` or the
container takes care of those.
"""

from __future__ import annotations

import signal

from tests.jobs_app.jobs import fault_spawn

from .harness import Faults, alive, wait_until


def test_a_subprocess_of_a_job_killed_for_its_hard_timeout_dies_with_it(faults: Faults) -> None:
    worker = faults.worker("--queues", "default", "--timeout-grace", "1", lease=1)
    faults.wait_ready(worker)
    job = fault_spawn.delay(faults.ledger, "hang", True)
    sleeper = faults.wait_event("spawned", tag="hang")["child"]
    assert alive(sleeper)
    faults.wait_final([job.id], timeout=15)
    [error] = faults.check([job.id]).errors(job.id)
    assert "hard timeout" in error["message"]
    wait_until(lambda: not alive(sleeper), timeout=5, message="the job's subprocess outlived it")
    assert worker.alive()


def test_a_subprocess_left_behind_by_a_finished_job_dies_when_its_worker_exits(
    faults: Faults,
) -> None:
    worker = faults.worker("--queues", "default", lease=1)
    faults.wait_ready(worker)
    job = fault_spawn.delay(faults.ledger, "left", False)
    sleeper = faults.wait_event("spawned", tag="left")["child"]
    faults.wait_final([job.id], timeout=15)
    assert faults.state(job.id) == "succeeded"
    assert alive(sleeper)  # the worker still runs: the job's leftovers may too
    worker.signal(signal.SIGTERM)
    assert worker.wait(20) == 0
    wait_until(
        lambda: not alive(sleeper), timeout=5, message="the job's subprocess outlived its worker"
    )
