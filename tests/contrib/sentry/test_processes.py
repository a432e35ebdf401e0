"""The Sentry integration across real processes: this process enqueues inside a
transaction, a real ``rqueue_work`` (sentry-sdk set up by tests/settings.py from
``RQUEUE_TEST_SENTRY_DIR``, envelopes written to files) runs the jobs. One event for the
job that failed for good, none for the one whose retry succeeded; every attempt's
transaction continues this process's trace from the job's headers; the children flush at
``worker_process_shutdown``; a periodic entry's ticks are check-ins opened by the poller
and closed by the worker, each tick in a trace of its own."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import sentry_sdk

from django_rqueue import JobStatus
from django_rqueue.job import Job
from tests.jobs_app.jobs import fail_always, fail_then_succeed, record
from tests.support.processes import STARTUP, CommandProcess, Processes, command_env
from tests.support.waiting import wait_until

from .conftest import Start
from .recording import DIR_ENV, items, read


def _env(folder: Path, **extra: str) -> dict[str, str]:
    folder.mkdir()
    return command_env(extra={DIR_ENV: str(folder), **extra})


def _stop(worker: CommandProcess, processes: Processes) -> None:
    """SIGTERM the worker and wait for its clean exit (its children flush on the way)."""
    worker.signal(signal.SIGTERM)
    assert worker.wait(STARTUP) == 0, processes.reports()


def _final(jobs: list[Job[Any]]) -> bool:
    for job in jobs:
        job.refresh()
    return all(job.status in (JobStatus.SUCCEEDED, JobStatus.FAILED) for job in jobs)


def test_a_worker_reports_failures_once_and_continues_the_trace(
    sentry: Start, tmp_path: Path, ledger: str
) -> None:
    sentry()
    with sentry_sdk.start_transaction(op="http.server", name="checkout") as view:
        failing = fail_always.delay(ledger, "x")
        flaky = fail_then_succeed.delay(ledger, "f", 1)
        fine = record.delay(ledger, "r")
    jobs: list[Job[Any]] = [failing, flaky, fine]
    folder = tmp_path / "sentry"
    processes = Processes(tmp_path / "commands")
    try:
        worker = processes.start("rqueue_work", "--concurrency", "2", env=_env(folder))
        wait_until(lambda: _final(jobs), timeout=STARTUP + 10, interval=0.1)
        _stop(worker, processes)
    finally:
        processes.kill_all()
    assert [job.status for job in jobs] == [JobStatus.FAILED, *[JobStatus.SUCCEEDED] * 2]
    written = read(folder)

    [event] = items(written, "event")
    assert event["tags"]["rqueue.job"] == fail_always.name
    assert event["tags"]["rqueue.job_id"] == failing.id
    assert (event["tags"]["rqueue.attempt"], event["tags"]["rqueue.outcome"]) == ("3", "failed")
    assert event["contexts"]["trace"]["trace_id"] == view.trace_id

    transactions = items(written, "transaction")
    attempts = {job.id: 0 for job in jobs}
    for transaction in transactions:
        trace = transaction["contexts"]["trace"]
        job = next(j for j in jobs if j.id == trace["data"]["messaging.message.id"])
        attempts[job.id] += 1
        assert transaction["transaction"] == job.name and trace["op"] == "queue.process"
        _, publish_span, _ = job.headers["sentry-trace"].split("-")
        assert (trace["trace_id"], trace["parent_span_id"]) == (view.trace_id, publish_span)
    assert attempts == {failing.id: 3, flaky.id: 2, fine.id: 1}

    # Every child that sent something flushed before it exited (os._exit skips atexit).
    senders = {line["pid"] for line in written if "items" in line}
    flushed = {line["pid"] for line in written if line.get("flushed")}
    assert senders and worker.pid not in senders
    assert senders <= flushed, (senders, flushed)


def test_a_periodic_entry_reports_check_ins_per_tick(tmp_path: Path, ledger: str) -> None:
    folder = tmp_path / "sentry"
    schedule = {"tick": {"job": record.name, "every": 1, "args": [ledger, "t"]}}
    env = _env(
        folder,
        RQUEUE_TEST_SCHEDULE=json.dumps(schedule),
        RQUEUE_TEST_SENTRY_OPTIONS=json.dumps({"monitor_periodic": True}),
    )

    def closed() -> list[dict[str, Any]]:
        return [c for c in items(read(folder), "check_in") if c["status"] == "ok"]

    processes = Processes(tmp_path / "commands")
    try:
        worker = processes.start("rqueue_work", "--concurrency", "1", env=env)
        wait_until(lambda: len(closed()) >= 2, timeout=STARTUP + 10, interval=0.1)
        _stop(worker, processes)
    finally:
        processes.kill_all()
    written = read(folder)
    check_ins = items(written, "check_in")
    opened = {c["check_in_id"]: c for c in check_ins if c["status"] == "in_progress"}
    ok = [c for c in check_ins if c["status"] == "ok"]
    assert len(ok) >= 2 and {c["monitor_slug"] for c in check_ins} == {"tick"}
    for check_in in ok:
        start = opened[check_in["check_in_id"]]  # opened by the poller, closed by a child
        assert start["_pid"] != check_in["_pid"]
        assert "monitor_config" not in start  # every 1 s: Sentry has no such interval
        assert 0 <= check_in["duration"] < 10
    traces = [t["contexts"]["trace"]["trace_id"] for t in items(written, "transaction")]
    assert len(traces) >= 2 and len(set(traces)) == len(traces)  # a trace per tick
