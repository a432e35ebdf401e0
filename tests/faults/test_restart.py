"""``manage.py rqueue_restart`` while jobs run: every worker re-execs itself and no job is lost.

Every worker sees the request at its next heartbeat, stops like on SIGTERM
(running jobs get ``--shutdown-timeout``, the rest are handed back without
spending an attempt), leaves the registry and re-execs itself with the same
command line. Nothing is lost, and the worker is back within seconds.
"""

from __future__ import annotations

import io
import time

import pytest
from django.core.management import call_command

from django_rqueue.ops.workers import WorkerInfo, list_workers
from tests.jobs_app.jobs import fault_noop, fault_sleep

from .harness import Faults, alive, wait_until


@pytest.mark.slow
def test_rqueue_restart_while_jobs_run_loses_nothing(faults: Faults) -> None:
    worker = faults.worker("--queues", "default", "--concurrency", "2", "--shutdown-timeout", "1")
    old_children = set(faults.wait_ready(worker))
    [before] = wait_until(list_workers, timeout=5, message="worker not in the registry")
    assert before.pid == worker.pid
    short = fault_sleep.delay(faults.ledger, "short", 0.3)  # ends within the shutdown timeout
    long = fault_sleep.delay(faults.ledger, "long", 2.5)  # handed back, runs again after
    faults.wait_event("start", tag="short")
    faults.wait_event("start", tag="long")

    out = io.StringIO()
    requested = time.monotonic()
    call_command("rqueue_restart", stdout=out)
    assert "Restart requested for 1 live worker(s)." in out.getvalue()

    def restarted() -> WorkerInfo | None:
        found = [w for w in list_workers() if w.started_at > before.started_at]
        return found[0] if found else None

    after = wait_until(restarted, timeout=20, interval=0.1, message="worker did not come back")
    assert after is not None
    back_in = time.monotonic() - requested
    same_pid = after.pid == worker.pid
    print(f"worker re-registered {back_in:.1f} s after rqueue_restart (same pid: {same_pid})")
    assert back_in < 15
    assert isinstance(after.pid, int) and alive(after.pid)
    wait_until(lambda: len(list_workers()) == 1, timeout=5, message="the old entry lingers")

    fresh = [fault_noop.delay(faults.ledger, f"new{i}") for i in range(5)]
    ids = [short.id, long.id, *(j.id for j in fresh)]
    report = faults.wait_and_check(ids, timeout=20)
    assert set(report.states.values()) == {"succeeded"}
    assert report.starts[short.id] == 1
    assert report.starts[long.id] == 2  # interrupted by the restart, handed back, run again
    assert report.jobs[long.id]["attempts"] == "1", "the handed-back attempt was spent"
    assert report.errors(long.id) == []
    assert {k: v for k, v in report.duplicates.items() if k != long.id} == {}
    new_pids = {e["pid"] for e in faults.events("start") if e["tag"].startswith("new")}
    assert new_pids.isdisjoint(old_children), "a pre-restart child ran new jobs"
    if same_pid:
        assert worker.alive()  # re-exec'd in place: the process we started serves again
