"""``rqueue_pause`` / ``rqueue_resume``: the commands, and a real ``rqueue_work`` obeying them."""

from __future__ import annotations

import time
from io import StringIO
from pathlib import Path

import pytest
import redis
from django.core.management import CommandError, call_command

from django_rqueue import JobStatus, get_job
from django_rqueue.ops.counts import queue_counts
from tests.jobs_app.jobs import fault_gate, read_ledger, record
from tests.support.waiting import wait_until

from .conftest import Manage
from .test_rqueue_work import wait_serving


def run(name: str, *args: str) -> str:
    out = StringIO()
    call_command(name, *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def blocked(client: redis.Redis) -> int:
    """Connections blocked in BLPOP (idle worker children, the poller)."""
    return sum(1 for c in client.client_list() if c.get("cmd") == "blpop")


def test_pause_and_resume_say_what_they_did():
    assert "paused" in run("rqueue_pause", "emails")
    assert queue_counts("emails").paused
    assert not queue_counts("default").paused
    assert "already paused" in run("rqueue_pause", "emails")
    assert "resumed" in run("rqueue_resume", "emails")
    assert not queue_counts("emails").paused
    assert "was not paused" in run("rqueue_resume", "emails")


@pytest.mark.parametrize("command", ["rqueue_pause", "rqueue_resume"])
def test_an_undeclared_queue_is_a_command_error_naming_it(command: str, rqueue_redis: redis.Redis):
    with pytest.raises(CommandError, match="'nope' is not declared"):
        run(command, "nope")
    assert rqueue_redis.keys("*paused*") == []


def test_a_paused_queue_still_accepts_delay():
    run("rqueue_pause", "default")
    job = record.delay("/dev/null", "later")
    assert job.status is JobStatus.QUEUED
    assert queue_counts("default").queued == 1


def test_pause_during_a_drain_lets_running_jobs_finish_and_starts_none_until_resume(
    manage: Manage, ledger: str, tmp_path: Path, rqueue_redis: redis.Redis
) -> None:
    worker = manage("rqueue_work", "--queues", "default", "--concurrency", "2")
    wait_serving(worker, rqueue_redis)
    gate = str(tmp_path / "gate")
    running = [fault_gate.delay(ledger, f"gate{n}", gate) for n in range(2)]
    wait_until(
        lambda: len([e for e in read_ledger(ledger) if e["event"] == "start"]) == 2,
        timeout=10,
        message="both children started a gated job",
    )
    waiting = [record.delay(ledger, f"rec{n}") for n in range(6)]

    run("rqueue_pause", "default")
    Path(gate).touch()  # the running jobs finish and report while the queue is paused
    wait_until(
        lambda: all(get_job(j.id).status is JobStatus.SUCCEEDED for j in running),  # type: ignore[union-attr]
        timeout=10,
        message="running jobs did not finish while paused",
    )
    # The children go back to sleep on Redis (the poller may be asleep too) without
    # taking a job; one enqueued now waits as well.
    wait_until(lambda: blocked(rqueue_redis) >= 2, timeout=10, message="children idle")
    late = record.delay(ledger, "late")
    assert not [e for e in read_ledger(ledger) if e["tag"].startswith("rec") or e["tag"] == "late"]
    assert queue_counts("default").queued == 7
    assert all(get_job(j.id).status is JobStatus.QUEUED for j in [*waiting, late])  # type: ignore[union-attr]

    resumed_at = time.time()
    run("rqueue_resume", "default")
    ran = wait_until(
        lambda: [e for e in read_ledger(ledger) if e["event"] == "run"][6:] and read_ledger(ledger),
        timeout=10,
        message="queued jobs did not run after resume",
    )
    runs = [e for e in ran if e["event"] == "run"]
    assert sorted(e["tag"] for e in runs) == sorted([f"rec{n}" for n in range(6)] + ["late"])
    assert all(e["t"] >= resumed_at for e in runs)
