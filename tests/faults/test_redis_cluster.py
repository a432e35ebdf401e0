"""Real ``rqueue_work`` processes on the session's three-master Redis Cluster.

The queues ``default``, ``emails`` and ``low`` hash to slots on the three
different masters. A worker drains all three and wakes for a job on any of
them within a second; a busy queue's slot moved to another master (in one
``MIGRATE``; ``test_reshard.py`` moves one with ``redis-cli``'s defaults) while
two workers drain it loses no job and runs none twice.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis.crc import key_slot

from django_rqueue.engine.connection import get_client
from django_rqueue.engine.keys import QueueKeys
from tests.jobs_app.jobs import fault_noop, fault_sleep
from tests.support.redis_cluster import LocalCluster

from .harness import Faults, WorkerProcess

QUEUES = ["default", "emails", "low"]
#: A wake-up this fast cannot come from the idle wait's timeout (``IDLE_BLOCK``, 4 s).
PROMPT = 1.0


@pytest.fixture
def faults(tmp_path: Path, redis_cluster: LocalCluster) -> Iterator[Faults]:
    """The fault harness on the cluster: its checks read through a cluster client."""
    with Faults.session(tmp_path, get_client(), redis_cluster.url) as harness:
        yield harness


def cluster_worker(faults: Faults, queues: list[str], concurrency: int = 2) -> WorkerProcess:
    worker = faults.worker("--queues", ",".join(queues), "--concurrency", str(concurrency))
    faults.wait_ready(worker)
    return worker


def enqueue(faults: Faults, queue: str, count: int, tag: str) -> list[str]:
    calls: list[tuple[tuple[str, str], dict[str, Any]]] = [
        ((faults.ledger, f"{tag}{n}"), {}) for n in range(count)
    ]
    return [j.id for j in fault_noop.using(queue=queue).delay_many(calls)]


def enqueue_slow(faults: Faults, queue: str, count: int, tag: str) -> list[str]:
    """Jobs of 10 ms each: four children drain them at most ~400/s, so a backlog of
    2 000 lasts seconds, longer than a slot move on an idle host."""
    calls: list[tuple[tuple[str, str, float], dict[str, Any]]] = [
        ((faults.ledger, f"{tag}{n}", 0.01), {}) for n in range(count)
    ]
    return [j.id for j in fault_sleep.using(queue=queue).delay_many(calls)]


def master_of(cluster: LocalCluster, queue: str) -> int:
    return cluster.node_of(key_slot(QueueKeys.of("rqueue", queue).base.encode()))


def test_a_worker_drains_queues_on_three_masters_and_wakes_for_each(
    faults: Faults, redis_cluster: LocalCluster
) -> None:
    assert {master_of(redis_cluster, q) for q in QUEUES} == {0, 1, 2}
    ids = [i for q in QUEUES for i in enqueue(faults, q, 100, f"{q}-")]

    cluster_worker(faults, QUEUES)

    report = faults.wait_and_check(ids, timeout=60)
    assert report.duplicates == {}
    for queue in QUEUES:  # idle now: a job on any master starts at once
        enqueued = time.time()
        fault_noop.using(queue=queue).delay(faults.ledger, f"late-{queue}")
        start = faults.wait_event("start", tag=f"late-{queue}", timeout=15)
        assert float(start["t"]) - enqueued < PROMPT


def test_a_busy_queues_slot_moves_to_another_master_and_no_job_is_lost_or_doubled(
    faults: Faults, redis_cluster: LocalCluster
) -> None:
    ids = enqueue_slow(faults, "default", 2000, "before-")
    workers = [cluster_worker(faults, ["default"]) for _ in range(2)]
    slot = key_slot(QueueKeys.of("rqueue", "default").base.encode())
    source = redis_cluster.node_of(slot)
    faults.wait_event("acked", count=50, timeout=30)  # the queue is being drained

    # Jobs keep coming in while the slot moves there and back.
    more: list[str] = []
    enqueuer = threading.Thread(
        target=lambda: more.extend(
            i for n in range(10) for i in enqueue_slow(faults, "default", 20, f"during-{n}-")
        )
    )
    enqueuer.start()
    moved = redis_cluster.move_slot(slot, (source + 1) % 3, batch=None)
    assert len(faults.events("acked")) < len(ids)  # moved while the backlog was drained
    assert moved > 0 and redis_cluster.node_of(slot) == (source + 1) % 3
    faults.wait_event("acked", count=len(faults.events("acked")) + 50, timeout=30)
    redis_cluster.move_slot(slot, source, batch=None)
    enqueuer.join(30)

    report = faults.wait_and_check(ids + more, timeout=90)
    assert report.duplicates == {}
    assert all(w.alive() for w in workers)
