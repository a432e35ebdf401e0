"""Redis Sentinel: ``kill -9`` of the master while jobs flow; everything goes on on the replica.

A :class:`~tests.support.redis_sentinel.SentinelSet` (master, replica, three
sentinels; ``down-after-milliseconds`` 1000) serves ``RQUEUE["SENTINELS"]``
with ``REDIS_URL = "redis://mymaster/0"``, for this process and for the
subprocesses (``RQUEUE_TEST_SENTINELS``).

What is guaranteed, and asserted: the workers and the poller ride through
the failover without exiting, and every job enqueued once the sentinels have
promoted the replica runs, once, to success. What is not: replication is
asynchronous, so jobs (and acks) the old master accepted in its last moments
may be missing on the new master (the job is lost, or runs again); those are
counted and printed, not asserted. ``MIN_REPLICAS_ACK`` closes that window
for enqueues: 1 000 jobs enqueued with it all survive a ``kill -9`` right
after the last one returns.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_django.fixtures import Settings

from django_rqueue.engine.connection import get_client
from django_rqueue.engine.keys import QueueKeys
from django_rqueue.exceptions import RedisUnavailable
from tests.jobs_app.jobs import fault_noop
from tests.support.redis_sentinel import SentinelSet, sentinel_settings

from .harness import Faults, alive, wait_until

#: Jobs acked before the master is killed (the flow is steady by then).
ACKED_BEFORE_KILL = 100
#: Jobs enqueued after the promotion before the producer stops.
AFTER_PROMOTION = 200
#: Jobs of the durable-enqueue test.
DURABLE = 1000


@pytest.fixture
def sentinel_faults(
    tmp_path: Path,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    sentinel_set: SentinelSet,
) -> Iterator[Faults]:
    """A :class:`Faults` whose processes and this test reach Redis through the sentinels."""
    settings.RQUEUE = {**settings.RQUEUE, **sentinel_settings(sentinel_set)}
    monkeypatch.setenv("RQUEUE_TEST_SENTINELS", json.dumps(sentinel_set.addresses))
    # The harness reads job states through a client that follows the failover too.
    with Faults.session(tmp_path, get_client("default"), sentinel_set.url()) as harness:
        yield harness


@pytest.mark.slow
def test_workers_poller_and_delay_follow_a_failover_after_kill9_of_the_master(
    sentinel_faults: Faults, sentinel_set: SentinelSet
) -> None:
    faults = sentinel_faults
    workers = [
        faults.worker("--queues", "default", "--concurrency", "2", "--without-poller", lease=2)
        for _ in range(2)
    ]
    poller = faults.command("rqueue_poller", "--queues", "default", lease=2)
    children = {worker.pid: set(faults.wait_ready(worker)) for worker in workers}

    before: list[str] = []  # enqueued before the promotion (some may be lost)
    after: list[str] = []  # enqueued once the replica is the master: all must run
    refused = 0
    old = sentinel_set.master_address()
    killed_at: float | None = None
    killed_wall = 0.0
    promoted_at: float | None = None
    first_enqueue_after_kill: float | None = None
    deadline = time.monotonic() + 60
    while len(after) < AFTER_PROMOTION:
        assert time.monotonic() < deadline, f"stuck: {len(before)} before, {len(after)} after"
        if killed_at is None and len(faults.events("acked")) >= ACKED_BEFORE_KILL:
            sentinel_set.master.kill9()
            killed_at, killed_wall = time.monotonic(), time.time()
        if killed_at is not None and promoted_at is None and sentinel_set.promoted(old):
            promoted_at = time.monotonic()
        started = time.monotonic()
        try:
            queued = fault_noop.delay(faults.ledger, str(len(before) + len(after)))
        except RedisUnavailable:
            refused += 1
            continue
        if killed_at is not None and first_enqueue_after_kill is None:
            first_enqueue_after_kill = time.monotonic()
        (after if promoted_at is not None and started > promoted_at else before).append(queued.id)
        time.sleep(0.002)  # a steady producer, not a flood: about 300 jobs/s at most
    assert killed_at is not None and promoted_at is not None
    assert first_enqueue_after_kill is not None

    report = faults.wait_and_check(after, timeout=30)  # each succeeded, acked once by its holder
    assert set(report.states.values()) == {"succeeded"}
    first_ack = min(e["t"] for e in faults.events("acked") if e["t"] > killed_wall)
    assert all(worker.alive() for worker in workers), "a worker exited during the failover"
    assert {w.pid: set(w.children()) for w in workers} == children, "a worker child died"
    assert alive(poller.pid), "the poller exited during the failover"

    lost, unfinished = _fate(before)
    print(
        f"failover: replica promoted {promoted_at - killed_at:.1f} s after the kill -9; "
        f".delay() failed for {first_enqueue_after_kill - killed_at:.1f} s ({refused} calls "
        f"raised RedisUnavailable); the first job acked on the new master "
        f"{first_ack - killed_wall:.1f} s after the kill; of {len(before)} jobs enqueued "
        f"before the promotion {len(lost)} were lost with the old master and "
        f"{len(unfinished)} did not finish within 20 s"
    )


def _fate(job_ids: list[str]) -> tuple[list[str], list[str]]:
    """Of ``job_ids`` on the new master: those missing (lost) and those not final yet, once
    every present one had a lease's time to be reclaimed and run (up to 20 s)."""
    client = get_client("default")
    keys = QueueKeys.of("rqueue", "default")

    def states() -> list[Any]:
        pipe = client.pipeline(transaction=False)
        for job_id in job_ids:
            pipe.hget(keys.job(job_id), "s")
        return pipe.execute()

    def settled() -> bool:
        return all(s not in (b"queued", b"running") for s in states())

    try:
        wait_until(settled, timeout=20, interval=0.2)
    except AssertionError:
        pass  # reported below
    found = states()
    lost = [i for i, s in zip(job_ids, found, strict=True) if s is None]
    unfinished = [
        i for i, s in zip(job_ids, found, strict=True) if s not in (None, b"succeeded", b"failed")
    ]
    return lost, unfinished


@pytest.mark.slow
def test_jobs_enqueued_with_min_replicas_ack_survive_a_kill9_right_after(
    settings: Settings, sentinel_set: SentinelSet, tmp_path: Path
) -> None:
    settings.RQUEUE = {
        **settings.RQUEUE,
        **sentinel_settings(sentinel_set),
        "MIN_REPLICAS_ACK": 1,
        "MIN_REPLICAS_TIMEOUT": 2,
    }
    ledger = str(tmp_path / "ledger")
    ids = [fault_noop.delay(ledger, str(n)).id for n in range(DURABLE // 2)]
    calls: list[tuple[tuple[str, str], dict[str, Any]]] = [
        ((ledger, str(n)), {}) for n in range(DURABLE // 2, DURABLE)
    ]
    ids += [j.id for j in fault_noop.delay_many(calls, batch_size=100)]
    old = sentinel_set.master_address()
    sentinel_set.master.kill9()  # right after the last enqueue returned

    new = sentinel_set.wait_failover(old)
    keys = QueueKeys.of("rqueue", "default")
    with sentinel_set.server_at(new).client() as master:
        pipe = master.pipeline(transaction=False)
        for job_id in ids:
            pipe.hget(keys.job(job_id), "s")
        states = pipe.execute()
    assert len(set(ids)) == DURABLE
    assert states == [b"queued"] * DURABLE, f"{states.count(None)} job(s) lost"
