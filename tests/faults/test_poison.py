"""A job that kills its own process on every attempt is failed for good; other jobs keep running.

It reaches the failed store after ``max_attempts`` (3) with the reason, while
the other jobs keep flowing through the same worker.
"""

from __future__ import annotations

from tests.jobs_app.jobs import fault_die, fault_noop, fault_sleep, fault_suicide

from .harness import Faults


def test_poison_job_is_failed_after_max_attempts_and_others_keep_flowing(faults: Faults) -> None:
    worker = faults.worker("--queues", "default", "--concurrency", "2", lease=1, grace=1)
    faults.wait_ready(worker)
    # A long job runs beside it: its lease (1 s) must keep being renewed meanwhile.
    long = fault_sleep.delay(faults.ledger, "long", 3)
    faults.wait_event("start", tag="long")
    poison = fault_suicide.delay(faults.ledger, "poison")
    others = fault_noop.delay_many(((faults.ledger, f"ok{n}"), {}) for n in range(60))
    ids = [poison.id, long.id, *(j.id for j in others)]

    report = faults.wait_and_check(ids, timeout=30)

    assert report.states[poison.id] == "failed"
    assert report.starts[poison.id] == 3
    errors = report.errors(poison.id)
    assert len(errors) == 3
    for error in errors:
        assert "worker process died (signal 9, SIGKILL)" in error["message"], error
    assert [e["event"] for e in faults.events(tag="poison") if e["event"] != "start"] == [
        "retrying",
        "retrying",
        "failed",
    ]
    assert all(report.states[j.id] == "succeeded" for j in [long, *others])
    assert report.duplicates == {poison.id: 3}
    assert worker.alive()
    assert worker.stderr().count("worker process died") == 3


def test_a_child_that_exits_or_crashes_mid_job_fails_the_attempt_with_the_cause(
    faults: Faults,
) -> None:
    worker = faults.worker("--queues", "default", "--concurrency", "1", lease=1, grace=1)
    faults.wait_ready(worker)
    causes = {
        "exit0": "worker process died (exit code 0)",  # no result reported: not a success
        "exit3": "worker process died (exit code 3)",
        "segfault": "worker process died (signal 11, SIGSEGV)",
    }
    jobs = {how: fault_die.delay(faults.ledger, how, how) for how in causes}
    after = fault_noop.delay(faults.ledger, "after")

    report = faults.wait_and_check([*(j.id for j in jobs.values()), after.id], timeout=20)

    for how, cause in causes.items():
        assert report.states[jobs[how].id] == "failed"
        [error] = report.errors(jobs[how].id)
        assert cause in error["message"], (how, error)
    assert report.states[after.id] == "succeeded"
    pids = [e["pid"] for e in faults.events("start")]
    assert len(set(pids)) == 4, "each death must be followed by a fresh child"
    assert worker.alive()
