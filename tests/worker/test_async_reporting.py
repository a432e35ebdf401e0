"""An async job's outcome is reported from the event loop (worker.reporting.adeliver_outcome,
worker.async_runner): the ack and the failure go through the loop's asyncio client, a lost
reply is sent again, and ``close_old_connections()`` runs once for the jobs that end
together, not once per job."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import redis

from django_rqueue import JobStatus
from django_rqueue.engine import run
from django_rqueue.engine.commands import Command
from django_rqueue.exceptions import RedisUnavailable
from django_rqueue.worker import async_runner
from tests.jobs_app.jobs import async_record, fault_async_flaky, fault_async_gate, read_ledger
from tests.support.inprocess import run_worker

pytestmark = pytest.mark.usefixtures("worker_may_close_db_connections")


def script_of(step: Any) -> str:
    return step.call.script if isinstance(step, Command) else ""


def test_acks_and_failures_go_through_the_event_loops_client_in_its_thread(
    ledger: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No thread hop and no sync round trip: every ack and fail of an async job is an
    ``aexecute`` made in the worker's own thread (the event loop's)."""
    seen: list[tuple[str, int]] = []
    sync_reports: list[str] = []
    real_async, real_sync = run.aexecute, run.execute

    async def noting(client: Any, step: Any) -> Any:
        seen.append((script_of(step), threading.get_ident()))
        return await real_async(client, step)

    def noting_sync(client: Any, step: Any, *args: Any) -> Any:
        if script_of(step) in ("ack", "fail"):
            sync_reports.append(script_of(step))
        return real_sync(client, step, *args)

    monkeypatch.setattr(run, "aexecute", noting)
    monkeypatch.setattr(run, "execute", noting_sync)
    ok = [async_record.delay(ledger, f"ok{n}") for n in range(3)]
    flaky = fault_async_flaky.delay(ledger, "flaky", 5)  # fails its first attempt

    run_worker(burst=True, async_concurrency=4)

    loop_thread = threading.get_ident()  # run_worker runs the worker in this thread
    assert [s for s, _ in seen if s == "ack"] == ["ack"] * 3
    assert [s for s, _ in seen if s == "fail"] == ["fail"]
    assert {t for s, t in seen if s in ("ack", "fail")} == {loop_thread}
    assert sync_reports == []
    for job in ok:
        job.refresh()
        assert (job.status, job.result) == (JobStatus.SUCCEEDED, job.args[1])
    flaky.refresh()
    assert (flaky.status, flaky.attempts) == (JobStatus.SCHEDULED, 1)


def test_an_ack_whose_reply_was_lost_is_sent_again_and_the_job_succeeds_once(
    ledger: str, rqueue_redis: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    acks: list[str] = []
    real = run.aexecute

    async def lose_the_first_ack_reply(client: Any, step: Any) -> Any:
        reply = await real(client, step)
        if script_of(step) == "ack":
            acks.append(step.call.script)
            if len(acks) == 1:
                raise RedisUnavailable("connection lost before the reply")
        return reply

    monkeypatch.setattr(run, "aexecute", lose_the_first_ack_reply)
    job = async_record.delay(ledger, "once")

    worker = run_worker(burst=True, async_concurrency=2)

    assert len(acks) == 2  # the same ack, sent again after the lost reply
    job.refresh()
    assert (job.status, job.attempts, job.result) == (JobStatus.SUCCEEDED, 1, "once")
    assert [e["tag"] for e in read_ledger(ledger) if e["event"] == "run"] == ["once"]
    assert worker.processed == 1


def test_close_old_connections_runs_once_for_jobs_that_end_together(
    ledger: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """20 async jobs held by one gate end together: the ORM's thread is housekept a few
    times (the session's start and end, and the batches the loop saw), not 20 times, and
    always outside the event loop's thread."""
    calls: list[int] = []
    real = async_runner.close_old_connections

    def counting() -> None:
        calls.append(threading.get_ident())
        real()

    monkeypatch.setattr(async_runner, "close_old_connections", counting)
    gate = tmp_path / "gate"
    gate.touch()  # open from the start: the jobs end as soon as they start
    jobs = [fault_async_gate.delay(ledger, f"j{n}", str(gate)) for n in range(20)]

    worker = run_worker(burst=True, async_concurrency=20)

    assert worker.processed == 20
    for job in jobs:
        job.refresh()
        assert job.status is JobStatus.SUCCEEDED
    assert 2 <= len(calls) < 20
    assert threading.get_ident() not in calls
