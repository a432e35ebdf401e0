"""A busy queue's slot moved back and forth with ``redis-cli --cluster reshard``'s defaults.

``redis-cli --cluster reshard`` moves a slot's keys ``MIGRATE`` by ``MIGRATE``, 10
keys each (``--cluster-pipeline``'s default). Until its last key has moved, every
script of the queue is refused with ``TRYAGAIN`` (each names the queue's base key,
which no command creates, so neither master holds all of a script's keys), and
redis-py's cluster client gives up after 16 tries with ``ClusterError: TTL
exhausted``. Every process of a worker (the master's renewals and reports, the
children's reserves and acks, the poller child) and a standalone ``rqueue_poller``
must take that as a pause and retry: none may exit, no job may be lost or run twice.

Executions are counted out of Redis, in the ledger file of the ``fault_*`` jobs.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_django.fixtures import Settings as SettingsFixture
from redis.crc import key_slot

from django_rqueue.conf import get_config
from django_rqueue.engine.connection import get_client, reset_clients
from django_rqueue.engine.keys import QueueKeys
from tests.jobs_app.jobs import fault_sleep
from tests.support.redis_cluster import LocalCluster

from .harness import Faults

#: A queue whose hash slot (5461) is the lowest of the second master's slots when
#: ``redis-cli --cluster create`` splits 16384 slots over three masters, so
#: ``redis-cli --cluster reshard --cluster-slots 1`` (which moves the source's lowest
#: slots) moves exactly this queue, and back again from the third master.
QUEUE = "busy626"
#: Jobs ready at once, and delayed ones (the poller promotes them during the moves).
READY = 1500
DELAYED = 200
#: Moves of the slot (there and back twice).
MOVES = 4
#: Other keys in the queue's slot, as the records a busy queue keeps for ``result_ttl``:
#: 6 000 ``MIGRATE`` calls of 10 keys, so each move keeps the queue's scripts refused for
#: about a second (more than the ~0.4 s redis-py's cluster client retries ``TRYAGAIN``).
FILLER = 60_000


@pytest.fixture
def faults(
    tmp_path: Path, redis_cluster: LocalCluster, settings: SettingsFixture
) -> Iterator[Faults]:
    """The fault harness on the cluster, with :data:`QUEUE` declared here and in the
    processes the test starts."""
    queues = {**settings.RQUEUE["QUEUES"], QUEUE: {}}
    settings.RQUEUE = {**settings.RQUEUE, "QUEUES": queues}
    reset_clients()
    harness = Faults(tmp_path, get_client(), redis_cluster.url)
    try:
        yield harness
    finally:
        harness.stop_all()
        for process in harness.started:
            print(process.report())


def enqueue(faults: Faults, count: int, tag: str, delay: float = 0) -> list[str]:
    """``count`` jobs of 5 ms each (two children drain them at most ~400/s)."""
    calls: list[tuple[tuple[str, str, float], dict[str, Any]]] = [
        ((faults.ledger, f"{tag}{n}", 0.005), {}) for n in range(count)
    ]
    jobs = fault_sleep.using(queue=QUEUE, delay=delay or None).delay_many(calls)
    return [j.id for j in jobs]


def test_a_busy_queues_slot_resharded_with_redis_cli_defaults_kills_no_process(
    faults: Faults, redis_cluster: LocalCluster
) -> None:
    slot = key_slot(QUEUE.encode())
    home = redis_cluster.node_of(slot)
    other = (home + 1) % len(redis_cluster.nodes)
    assert redis_cluster.slots_of(home)[0] == slot, "the queue's slot is not its master's lowest"
    base = QueueKeys.of(get_config().key_prefix, QUEUE).base
    pipe = faults.client.pipeline(transaction=False)
    for n in range(FILLER):
        pipe.set(f"{base}kept:{n}", "x" * 100)
    pipe.execute()
    ids = enqueue(faults, READY, "ready-") + enqueue(faults, DELAYED, "later-", delay=2)
    env = {"RQUEUE_TEST_QUEUE_OPTIONS": json.dumps({QUEUE: {}})}
    worker = faults.worker("--queues", QUEUE, "--concurrency", "2", lease=10, env=env)
    poller = faults.command("rqueue_poller", "--queues", QUEUE, lease=10, env=env)
    children = set(faults.wait_ready(worker))  # its worker children and its poller child
    faults.wait_event("acked", count=50, timeout=30)  # the queue is being drained

    failures: list[BaseException] = []

    def move_back_and_forth() -> None:
        try:
            for n in range(MOVES):
                source, target = (home, other) if n % 2 == 0 else (other, home)
                assert redis_cluster.reshard(source, target) == slot
                assert redis_cluster.node_of(slot) == target
        except BaseException as exc:  # reported by the test thread
            failures.append(exc)

    mover = threading.Thread(target=move_back_and_forth)
    mover.start()
    mover.join(60)
    assert not mover.is_alive() and not failures, failures
    assert len(faults.events("acked")) < len(ids), "the backlog was drained before the moves"
    assert redis_cluster.node_of(slot) == home
    assert worker.alive(), worker.report()
    assert poller.alive(), poller.report()

    report = faults.wait_and_check(ids, timeout=60)
    assert report.duplicates == {}
    assert set(report.states.values()) == {"succeeded"}
    assert worker.alive(), worker.report()
    assert set(worker.children()) == children, "a child of the worker died and was replaced"
    assert poller.alive(), poller.report()
    for process in (worker, poller):
        for sign in ("Traceback", "crashed", "died"):
            assert sign not in process.stderr(), process.report()
