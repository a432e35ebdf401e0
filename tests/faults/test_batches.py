"""Batch reservations under the supervisor (``django_rqueue/worker/loop.py``, "Batches").

A child whose jobs are short and have no ``job_succeeded`` receiver reserves
several jobs per round trip and sends each ack without waiting for its reply.
Killed while it holds a batch, only the running job's attempt is spent: the
master hands the held jobs back (attempts stay 0) and each of them runs once.
"""

from __future__ import annotations

import os
import signal
from collections import Counter

import redis

from django_rqueue.engine.keys import QueueKeys
from tests.jobs_app.jobs import fault_noop, fault_sleep, fault_sleep_first
from tests.support.redis_server import RedisServer

from .harness import Faults, job_hash, wait_until
from .proxy import FaultProxy

#: Workers started with this have no job_succeeded receiver (tests/jobs_app/jobs.py).
NO_RECEIVER = {"RQUEUE_TEST_NO_SUCCESS_RECEIVER": "1"}
#: Long enough that a held job left to its lease would not finish within the test.
LEASE = 60.0
KEYS = QueueKeys.of("rqueue", "default")


def _reserved(client: redis.Redis) -> set[str]:
    return {
        i.decode() if isinstance(i, bytes) else str(i) for i in client.zrange(KEYS.reserved, 0, -1)
    }


def _starts(faults: Faults) -> Counter[str]:
    return Counter(e["id"] for e in faults.events("start"))


def test_a_batch_runs_every_job_exactly_once(faults: Faults) -> None:
    ids = [fault_noop.delay(faults.ledger, f"n{i}").id for i in range(400)]
    worker = faults.worker("--queues", "default", "--concurrency", "1", env=NO_RECEIVER)
    faults.wait_ready(worker)

    wait_until(
        lambda: (
            all(faults.state(i) == "succeeded" for i in ids[-5:])
            and all(faults.state(i) == "succeeded" for i in ids)
        ),
        timeout=60,
        message="not every job succeeded",
    )
    starts = _starts(faults)
    assert all(starts[i] == 1 for i in ids), {i: starts[i] for i in ids if starts[i] != 1}
    assert all(job_hash(faults.client, i)["attempts"] == "1" for i in ids)
    assert _reserved(faults.client) == set()
    assert worker.alive()


def test_a_child_killed_holding_a_batch_spends_only_the_running_jobs_attempt(
    faults: Faults,
) -> None:
    warm = fault_noop.delay(faults.ledger, "warm")  # a short job first: batches begin after it
    slow = fault_sleep_first.delay(faults.ledger, "slow", 60)
    held = [fault_noop.delay(faults.ledger, f"h{i}").id for i in range(10)]
    worker = faults.worker(
        "--queues", "default", "--concurrency", "1", lease=LEASE, grace=1, env=NO_RECEIVER
    )
    first = faults.wait_event("start", tag="slow", timeout=30)
    # The slow job came in one batch with jobs after it, all leased: as many as the batch
    # budget allows at the warm job's run time (all ten unless the host is slow).
    reserved = _reserved(faults.client)
    batch = [i for i in held if i in reserved]
    assert slow.id in reserved and batch, reserved
    assert {faults.state(i) for i in batch} == {"running"}
    print(f"{len(batch)} job(s) held with the slow one")

    os.kill(first["pid"], signal.SIGKILL)

    wait_until(
        lambda: all(faults.state(i) == "succeeded" for i in [slow.id, *held]),
        timeout=30,  # well under LEASE: a held job left to its lease would not make it
        message="held jobs did not come back before their lease",
    )
    starts = _starts(faults)
    assert [starts[i] for i in held] == [1] * 10
    assert [job_hash(faults.client, i)["attempts"] for i in held] == ["1"] * 10
    killed = job_hash(faults.client, slow.id)
    assert killed["attempts"] == "2"  # the running job's attempt was spent (WorkerLost)
    assert faults.state(warm.id) == "succeeded"
    assert "handed" in worker.stderr() + worker.stdout()
    assert _reserved(faults.client) == set()


def test_connections_reset_during_batches_lose_nothing_and_run_nothing_twice(
    faults: Faults, redis_server: RedisServer
) -> None:
    """Resets cut acks in flight on the child's ack connection: resent, each applied once."""
    with FaultProxy(redis_server.port) as proxy:
        # 2 ms per job: the drain lasts seconds on any host (a no-op drain of 2 000
        # jobs can end within two polls on a fast one), and jobs stay short enough
        # to be reserved 20 per batch.
        ids = [fault_sleep.delay(faults.ledger, f"r{i}", 0.002).id for i in range(2000)]
        worker = faults.worker(
            "--queues",
            "default",
            "--concurrency",
            "1",
            lease=3,
            env=NO_RECEIVER,
            redis_url=proxy.url(),
        )
        resets = 0

        def drained() -> bool:
            nonlocal resets
            if faults.events("start") and resets < 6:
                resets += 1  # every poll while the drain runs: cuts land mid-batch
                proxy.reset_all()
            return all(faults.state(i) == "succeeded" for i in ids)

        wait_until(drained, timeout=60, interval=0.1, message="jobs not all succeeded")
    assert resets >= 3
    print(worker.stderr().count("sending it again"), "acks resent after a lost reply")
    starts = _starts(faults)
    assert {i: starts[i] for i in ids if starts[i] != 1} == {}
    # A reserve call redis-py resent after a reset returned the jobs the lost reply
    # carried (reserve.lua's request id): none sat out a lease, none was charged twice.
    pipe = faults.client.pipeline(transaction=False)
    for job_id in ids:
        pipe.hget(KEYS.job(job_id), "attempts")
    assert set(pipe.execute()) == {b"1"}
    assert _reserved(faults.client) == set()
    assert worker.alive()
