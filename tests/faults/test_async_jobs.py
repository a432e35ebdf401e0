"""Async jobs under ``rqueue_work``: many in flight in one child, and that child killed.

One worker child (``--concurrency 1``) runs up to ``--async-concurrency``
coroutines at once, each under its own reservation, which the master renews
and times out one by one. When the child dies, the master fails the attempts
it must (a dead child: all its running jobs; a hard timeout: the job that
overran) and hands the others back without spending an attempt.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from django_rqueue.engine.scripts import load
from tests.jobs_app.jobs import fault_async_block, fault_async_gate, fault_async_sleep_first
from tests.support.redis_commands import hold

from .harness import Faults, WorkerProcess, alive, job_hash, wait_until
from .proxy import FaultProxy

LEASE = 1.0


def one_child(
    faults: Faults, slots: int, *args: str, lease: float = LEASE, redis_url: str | None = None
) -> WorkerProcess:
    """``rqueue_work`` with one worker child running up to ``slots`` coroutines, ready."""
    worker = faults.worker(
        "--queues",
        "default",
        "--concurrency",
        "1",
        "--async-concurrency",
        str(slots),
        *args,
        lease=lease,
        grace=1,
        redis_url=redis_url,
    )
    faults.wait_ready(worker)
    return worker


def test_one_child_runs_a_hundred_coroutines_at_once(faults: Faults, tmp_path: Path) -> None:
    one_child(faults, 100)
    gate = tmp_path / "gate"
    ids = [fault_async_gate.delay(faults.ledger, f"j{i}", str(gate)).id for i in range(100)]

    # One child awaits them all at once (one at a time, the first would wait for the gate).
    starts = wait_until(
        lambda: (found := faults.events("start"))[99:] and found,
        timeout=20,
        message="100 async jobs were not in flight at once",
    )
    gate.touch()

    report = faults.wait_and_check(ids, timeout=20)
    assert set(report.states.values()) == {"succeeded"}
    assert report.duplicates == {}
    assert len({e["pid"] for e in starts}) == 1  # all in the one child
    assert len({(e["id"], e["token"]) for e in starts}) == 100


def test_a_hard_timeout_fails_the_job_that_overran_and_hands_the_others_back(
    faults: Faults,
) -> None:
    master = one_child(faults, 10).pid
    others = [fault_async_sleep_first.delay(faults.ledger, f"o{i}", 60).id for i in range(5)]
    faults.wait_event("start", count=5)
    blocker = fault_async_block.delay(faults.ledger, "block")  # time.sleep on the loop
    first = faults.wait_event("start", tag="block")

    report = faults.wait_and_check([*others, blocker.id], timeout=20)

    assert report.states[blocker.id] == "failed"
    [error] = report.errors(blocker.id)
    assert "hard timeout after 2 s" in error["message"]
    assert faults.events("failed", tag="block")[0]["pid"] == master  # the master reported it
    assert not alive(first["pid"])
    for job_id in others:  # handed back unspent: run again as attempt 1, and succeed
        assert report.states[job_id] == "succeeded"
        assert report.starts[job_id] == 2
        assert [e["attempt"] for e in faults.events("start", job_id=job_id)] == [1, 1]
        assert report.jobs[job_id]["attempts"] == "1"
        assert report.errors(job_id) == []


def test_a_child_killed_with_twenty_coroutines_in_flight_loses_none(faults: Faults) -> None:
    master = one_child(faults, 20).pid
    ids = [fault_async_sleep_first.delay(faults.ledger, f"j{i}", 60).id for i in range(20)]
    starts = faults.wait_event("start", count=20)
    victim = starts["pid"]

    os.kill(victim, signal.SIGKILL)

    report = faults.wait_and_check(ids, timeout=20)
    assert set(report.states.values()) == {"succeeded"}
    for job_id in ids:  # the master failed each attempt at once (no lease expiry) and retried
        assert report.starts[job_id] == 2
        [error] = report.errors(job_id)
        assert "worker process died (signal 9, SIGKILL)" in error["message"]
        [retrying] = faults.events("retrying", job_id=job_id)
        assert retrying["pid"] == master
        [second] = faults.events("start", job_id=job_id)[1:]
        assert second["attempt"] == 2 and second["pid"] != victim


def test_sigterm_lets_running_coroutines_finish_and_starts_no_other(
    faults: Faults, tmp_path: Path
) -> None:
    worker = one_child(faults, 5)
    gate = tmp_path / "gate"
    ids = [fault_async_gate.delay(faults.ledger, f"j{i}", str(gate)).id for i in range(8)]
    faults.wait_event("start", count=5)

    worker.signal(signal.SIGTERM)
    wait_until(lambda: "stopping after the current job" in worker.stderr(), message="no stop")
    gate.touch()

    assert worker.wait(20) == 0
    report = faults.check(ids[:5])
    assert set(report.states.values()) == {"succeeded"}
    for job_id in ids[5:]:  # slots freed after the stop: not started
        assert job_hash(faults.client, job_id)["s"] == "queued"
        assert not faults.events("start", job_id=job_id)


def test_coroutines_past_the_shutdown_timeout_are_handed_back_unspent(
    faults: Faults, tmp_path: Path
) -> None:
    worker = one_child(faults, 5, "--shutdown-timeout", "0.5")
    gate = tmp_path / "gate"  # never opened
    ids = [fault_async_gate.delay(faults.ledger, f"j{i}", str(gate)).id for i in range(5)]
    faults.wait_event("start", count=5)

    worker.signal(signal.SIGTERM)

    assert worker.wait(20) == 0
    for job_id in ids:
        fields = job_hash(faults.client, job_id)
        assert (fields["s"], fields["attempts"]) == ("queued", "0")


def test_coroutines_and_their_child_ride_out_a_redis_outage(
    faults: Faults, proxy: FaultProxy, tmp_path: Path
) -> None:
    """Redis refuses connections for 2 s (well under a 6 s lease) while 5 coroutines run
    and finish: their reports wait for Redis, the idle wait and the reservations back off,
    and afterwards every job, also those queued meanwhile, runs once and succeeds."""
    worker = one_child(faults, 10, lease=6, redis_url=proxy.url())
    children = set(worker.children())
    gate = tmp_path / "gate"
    running = [fault_async_gate.delay(faults.ledger, f"r{i}", str(gate)).id for i in range(5)]
    faults.wait_event("start", count=5)

    proxy.set_mode("refuse", reset=True)
    gate.touch()  # they finish during the outage; no report can reach Redis
    queued = [fault_async_gate.delay(faults.ledger, f"q{i}", str(gate)).id for i in range(10)]
    hold(2.0, lambda: worker.alive() and set(worker.children()) == children, "a process died")
    assert len(faults.events("end")) == 5 and faults.events("acked") == []
    proxy.set_mode("pass")

    report = faults.wait_and_check(running + queued, timeout=20)
    assert set(report.states.values()) == {"succeeded"}
    assert report.duplicates == {}


def test_acks_of_coroutines_whose_replies_were_lost_are_sent_again_and_each_runs_once(
    faults: Faults, proxy: FaultProxy, tmp_path: Path
) -> None:
    """Coroutines end together and their acks go out in batches; Redis applies them and
    the replies are lost (then the connection is reset). The worker sends each ack again,
    reads it as applied, and every job ends succeeded after one run, none discarded."""
    worker = one_child(faults, 5, lease=30, redis_url=proxy.url())
    faults.client.script_load(load("ack").source)  # applied, not answered NOSCRIPT
    warm = fault_async_gate.delay(faults.ledger, "warm", str(tmp_path / "warm")).id
    (tmp_path / "warm").touch()  # its ack leaves a connection open in the child's pool
    faults.wait_and_check([warm], timeout=10)
    gate = tmp_path / "gate"
    ids = [fault_async_gate.delay(faults.ledger, f"j{i}", str(gate)).id for i in range(5)]
    faults.wait_event("start", count=6)

    proxy.set_mode("drop_replies")
    gate.touch()
    wait_until(
        lambda: "succeeded" in {faults.state(job_id) for job_id in ids},
        timeout=10,
        message="no ack arrived",
    )
    wait_until(lambda: proxy.stats.dropped_down > 0, timeout=2, message="no reply was dropped")
    assert {e["id"] for e in faults.events("acked")} == {warm}, "no ack can be known applied"
    proxy.set_mode("pass", reset=True)

    report = faults.wait_and_check(ids, timeout=30)
    assert set(report.states.values()) == {"succeeded"}
    assert all(report.starts[job_id] == 1 for job_id in ids) and report.duplicates == {}
    assert {e["id"] for e in faults.events("acked")} == {warm, *ids}
    assert "discard" not in worker.stderr()
    assert worker.alive()
