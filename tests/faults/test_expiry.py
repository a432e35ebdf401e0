"""Jobs whose expiry passes while they wait behind a slow job are never run by a real worker.

``rqueue_work --concurrency 1`` runs a job that blocks on a gate file; jobs
with ``expires=1`` (seconds, and one with a unique key) queue behind it, then
a job without expiry. Once the Redis clock is past their expiry the gate
opens: the worker drains the queue, the expired jobs end ``cancelled`` with
reason ``expired`` without ever starting, and no ``job_failed`` (nor
``job_retrying``) receiver fires in the worker (the ledger's ``failed`` and
``retrying`` lines are written by those receivers).
"""

from __future__ import annotations

from pathlib import Path

from django_rqueue import CancelReason, JobStatus, get_job
from tests.jobs_app.jobs import fault_gate, fault_noop
from tests.support.inprocess import keys, stats

from .harness import Faults, job_hash, wait_until


def test_jobs_that_expire_behind_a_slow_job_are_never_run_and_fire_no_failure(
    faults: Faults, tmp_path: Path
) -> None:
    worker = faults.worker("--queues", "default", "--concurrency", "1")
    faults.wait_ready(worker)
    gate = str(tmp_path / "gate")
    slow = fault_gate.delay(faults.ledger, "slow", gate)
    faults.wait_event("start", tag="slow")
    doomed = fault_noop.using(expires=1).delay_many(
        ((faults.ledger, f"doomed{n}"), {}) for n in range(20)
    )
    doomed.append(fault_noop.using(expires=1, unique_key="once").delay(faults.ledger, "unique"))
    after = fault_noop.delay(faults.ledger, "after")
    deadline = max(int(job_hash(faults.client, j.id)["exp"]) for j in doomed)

    def redis_ms() -> int:
        seconds, micros = faults.client.time()
        return int(seconds) * 1000 + int(micros) // 1000

    wait_until(lambda: redis_ms() >= deadline, timeout=5, message="the jobs' expiry came")
    Path(gate).touch()

    report = faults.wait_and_check([slow.id, after.id], timeout=20)
    assert report.states == {slow.id: "succeeded", after.id: "succeeded"}
    for sent in doomed:
        got = get_job(sent.id)
        assert got is not None, sent.id
        assert (got.status, got.cancel_reason) == (JobStatus.CANCELLED, CancelReason.EXPIRED)
        assert got.attempts == 0 and got.errors == []
    started = {e["tag"] for e in faults.events("start")}
    assert started == {"slow", "after"}
    assert faults.events("failed") == [] and faults.events("retrying") == []
    counters = stats(faults.client)
    assert counters["expired"] == len(doomed) and "failed" not in counters
    assert not faults.client.exists(keys().unique("once"))  # released with its expired job
    assert worker.alive()
