"""``worker_process_init`` / ``worker_process_shutdown`` sent by a real ``rqueue_work``.

The receivers live in ``tests/jobs_app/jobs.py`` (connected when
``RQUEUE_TEST_PROCESS_LEDGER`` names a ledger): each writes one line with the
role as tag, the pid that wrote it and its parent's pid, so the test tells the
master from its children and a child from its replacement.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.jobs_app.jobs import fault_swallow_timeout, read_ledger, record
from tests.support.processes import STARTUP, CommandProcess, command_env
from tests.support.waiting import wait_until

from .conftest import Manage

pytestmark = pytest.mark.slow


def start(manage: Manage, tmp_path: Path, *args: str, **extra: str) -> tuple[CommandProcess, str]:
    processes = str(tmp_path / "processes.jsonl")
    env = command_env(extra={"RQUEUE_TEST_PROCESS_LEDGER": processes, **extra})
    return manage("rqueue_work", "--queues", "default", *args, env=env), processes


def lines(ledger: str, role: str, event: str) -> list[dict[str, Any]]:
    return [e for e in read_ledger(ledger) if e["tag"] == role and e["event"] == event]


def test_init_once_per_child_after_the_fork_and_shutdown_on_recycling_sigterm_and_master(
    manage: Manage, ledger: str, tmp_path: Path, rqueue_redis: redis.Redis
) -> None:
    worker, processes = start(manage, tmp_path, "--concurrency", "2", "--max-jobs", "1")
    wait_until(
        lambda: len(lines(processes, "child", "init")) == 2,
        timeout=STARTUP,
        message="two children did not start",
    )
    for n in range(3):
        record.delay(ledger, str(n))
    wait_until(lambda: len(read_ledger(ledger)) == 3, timeout=10, message="jobs did not run")
    # Three children recycled (--max-jobs 1), three replacements started.
    wait_until(lambda: len(lines(processes, "child", "init")) == 5, timeout=10)
    wait_until(lambda: len(lines(processes, "child", "shutdown")) == 3, timeout=10)
    recycled = {e["pid"] for e in lines(processes, "child", "shutdown")}
    assert recycled == {e["pid"] for e in read_ledger(ledger)}  # the children that ran a job

    stopped_at = time.time()
    worker.signal(signal.SIGTERM)
    assert worker.wait(20) == 0, worker.report()

    [master_init] = lines(processes, "master", "init")
    [master_down] = lines(processes, "master", "shutdown")
    inits = lines(processes, "child", "init")
    downs = lines(processes, "child", "shutdown")
    assert master_init["pid"] == master_down["pid"] == worker.pid
    assert master_init["sender"] == master_down["sender"]
    assert master_down["exitcode"] == 0
    # One init per child, sent in the child (its parent: the master), after the master's.
    assert len({e["pid"] for e in inits}) == 5
    assert all(e["ppid"] == worker.pid and e["sent_pid"] == e["pid"] for e in inits)
    assert all(e["t"] > master_init["t"] for e in inits)
    assert all(e["sender"].startswith(f"{master_init['sender']}/") for e in inits)
    # Each job ran in a child after that child's init.
    started = {e["pid"]: e["t"] for e in inits}
    assert all(run["t"] > started[run["pid"]] for run in read_ledger(ledger))
    # Every child sent its shutdown: the recycled ones before the SIGTERM, the two others
    # after it; all before the master's, each once, with a clean exit code.
    assert sorted(e["pid"] for e in downs) == sorted(started)
    assert {e["pid"] for e in downs if e["t"] < stopped_at} == recycled
    assert all(e["exitcode"] == 0 and e["t"] < master_down["t"] for e in downs)
    # The poller child sends its init after its fork too (it enqueues periodic runs); it is
    # killed at the stop, so it sends no shutdown.
    [poller_init] = lines(processes, "poller", "init")
    assert poller_init["ppid"] == worker.pid and poller_init["sent_pid"] == poller_init["pid"]
    assert poller_init["pid"] not in started and poller_init["t"] > master_init["t"]
    assert poller_init["sender"] == f"{master_init['sender']}/{poller_init['pid']}"
    assert lines(processes, "poller", "shutdown") == []


def test_a_hanging_shutdown_receiver_is_cut_short_and_a_raising_one_is_logged(
    manage: Manage, ledger: str, tmp_path: Path, rqueue_redis: redis.Redis
) -> None:
    worker, processes = start(
        manage,
        tmp_path,
        "--concurrency",
        "1",
        RQUEUE_TEST_PROCESS_HANG="1",
        RQUEUE_TEST_PROCESS_RAISE="1",
    )
    wait_until(lambda: lines(processes, "child", "init"), timeout=STARTUP, message="no child")
    record.delay(ledger, "ok")  # the init receiver raised: the child still serves
    wait_until(lambda: read_ledger(ledger), timeout=10, message="the job did not run")
    assert "signal receiver" in worker.stderr() and "init receiver fails" in worker.stderr()

    stopped = time.monotonic()
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0, worker.report()
    took = time.monotonic() - stopped
    [child_down] = lines(processes, "child", "shutdown")  # written before the receiver hung
    assert lines(processes, "master", "shutdown")
    assert 10.0 <= took < 20.0, took  # the 10 s bound, not --shutdown-timeout's 30 s
    assert (
        f"child {child_down['pid']}: worker_process_shutdown receivers still running after 10 s"
        in worker.stderr()
    )


def test_no_shutdown_from_a_child_killed_at_its_hard_timeout_and_init_in_its_replacement(
    manage: Manage, ledger: str, tmp_path: Path, rqueue_redis: redis.Redis
) -> None:
    worker, processes = start(manage, tmp_path, "--concurrency", "1", "--timeout-grace", "1")
    wait_until(lambda: lines(processes, "child", "init"), timeout=STARTUP, message="no child")
    fault_swallow_timeout.delay(ledger, "stuck")
    [run] = wait_until(lambda: read_ledger(ledger), timeout=10, message="the job did not run")
    wait_until(
        lambda: len(lines(processes, "child", "init")) == 2,
        timeout=10,
        message="the killed child was not replaced",
    )
    worker.signal(signal.SIGTERM)
    assert worker.wait(20) == 0, worker.report()
    first, second = lines(processes, "child", "init")
    assert first["pid"] == run["pid"] != second["pid"]
    # SIGKILLed by the master: nothing ran in it; its replacement shut down at the stop.
    assert [e["pid"] for e in lines(processes, "child", "shutdown")] == [second["pid"]]
