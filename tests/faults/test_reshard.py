"""A busy queue's slot moved back and forth with ``redis-cli --cluster reshard``'s defaults.

``redis-cli --cluster reshard`` moves a slot's keys ``MIGRATE`` by ``MIGRATE``, 10
keys each (``--cluster-pipeline``'s default). Until its last key has moved, every
script of the queue is refused with ``TRYAGAIN`` (each names the queue's base key,
which no command creates, so neither master holds all of a script's keys), and
redis-py's cluster client gives up after 16 tries with ``ClusterError: TTL
exhausted``. Every process of a worker (the master's renewals and reports, the
children's reserves and acks, the poller child) and a standalone ``rqueue_poller``
must take that as a pause and retry: none may exit, no job may be lost or run twice.

``delay_many`` sends the batches a moving slot refused again until the move is over
(each job written once), or, when it lasts longer than it waits, raises
``EnqueueIncomplete`` naming exactly the jobs that are in Redis.

Executions are counted out of Redis, in the ledger file of the ``fault_*`` jobs.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from pytest_django.fixtures import Settings as SettingsFixture
from redis.crc import key_slot

from django_rqueue import signals
from django_rqueue.conf import get_config
from django_rqueue.engine.connection import get_client, reset_clients
from django_rqueue.engine.keys import QueueKeys
from django_rqueue.enqueue import write
from django_rqueue.exceptions import EnqueueIncomplete, RedisUnavailable
from django_rqueue.job import Job
from tests.jobs_app.jobs import fault_noop, fault_sleep
from tests.support.redis_cluster import LocalCluster

from .harness import Faults, wait_until

#: A queue whose hash slot (5461) is the lowest of the second master's slots when
#: ``redis-cli --cluster create`` splits 16384 slots over three masters, so
#: ``redis-cli --cluster reshard --cluster-slots 1`` (which moves the source's lowest
#: slots) moves exactly this queue, and back again from the third master.
QUEUE = "busy626"
#: Jobs ready at once, and delayed ones (the poller promotes them during the moves).
READY = 1500
DELAYED = 200
#: Jobs left waiting at most while more are enqueued during the moves.
BACKLOG = 1000
#: Moves of the slot (there and back twice).
MOVES = 4
#: Other keys in the queue's slot, as the records a busy queue keeps for ``result_ttl``:
#: 6 000 ``MIGRATE`` calls of 10 keys, so each move keeps the queue's scripts refused for
#: about a second (more than the ~0.4 s redis-py's cluster client retries ``TRYAGAIN``).
FILLER = 60_000
#: The environment of the processes the tests start: :data:`QUEUE` declared.
ENV = {"RQUEUE_TEST_QUEUE_OPTIONS": json.dumps({QUEUE: {}})}


@pytest.fixture
def busy_queue(redis_cluster: LocalCluster, settings: SettingsFixture) -> LocalCluster:
    """The session's cluster, with :data:`QUEUE` declared (``RQUEUE["QUEUES"]``)."""
    queues = {**settings.RQUEUE["QUEUES"], QUEUE: {}}
    settings.RQUEUE = {**settings.RQUEUE, "QUEUES": queues}
    reset_clients()
    return redis_cluster


@pytest.fixture
def faults(tmp_path: Path, busy_queue: LocalCluster) -> Iterator[Faults]:
    """The fault harness on the cluster, :data:`QUEUE` declared here and in the processes the
    test starts (their ``env``: :data:`ENV`)."""
    with Faults.session(tmp_path, get_client(), busy_queue.url) as harness:
        yield harness


def _grew(items: list[str], size: int) -> bool:
    return len(items) > size


def enqueue_jobs(faults: Faults, count: int, tag: str, delay: float = 0) -> list[str]:
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
    ids = enqueue_jobs(faults, READY, "ready-") + enqueue_jobs(faults, DELAYED, "later-", delay=2)
    worker = faults.worker("--queues", QUEUE, "--concurrency", "2", lease=10, env=ENV)
    poller = faults.command("rqueue_poller", "--queues", QUEUE, lease=10, env=ENV)
    children = set(faults.wait_ready(worker))  # its worker children and its poller child
    faults.wait_event("acked", count=50, timeout=30)  # the queue is being drained

    failures: list[BaseException] = []
    moved = threading.Event()
    more: list[str] = []

    def move_back_and_forth() -> None:
        try:
            for n in range(MOVES):
                source, target = (home, other) if n % 2 == 0 else (other, home)
                assert redis_cluster.reshard(source, target) == slot
                assert redis_cluster.node_of(slot) == target
                # Before the next move: the worker drains again, a delay_many call ends.
                faults.wait_event("acked", count=len(faults.events("acked")) + 50, timeout=30)
                wait_until(partial(_grew, more, len(more)), timeout=30)
        except BaseException as exc:  # reported by the test thread
            failures.append(exc)
        finally:
            moved.set()

    def enqueue_meanwhile() -> None:  # delay_many waits out each move
        try:
            n = 0
            while not moved.is_set():
                more.extend(enqueue_jobs(faults, 50, f"during-{n}-"))
                n += 1
                # At most BACKLOG jobs waiting: the drain must not outlast the test.
                backlog = len(ids) + len(more) - BACKLOG
                faults.wait_event("acked", count=max(1, backlog), timeout=30)
        except BaseException as exc:
            failures.append(exc)

    threads = [
        threading.Thread(target=move_back_and_forth),
        threading.Thread(target=enqueue_meanwhile),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(t.is_alive() for t in threads) and not failures, failures
    ids += more
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


def test_a_moving_slot_pauses_its_queue_alone(faults: Faults, busy_queue: LocalCluster) -> None:
    """The worker serves :data:`QUEUE` first; while its slot is half moved, a job of another
    queue of the cluster (another slot) still starts at once, and :data:`QUEUE`'s once the
    move is over."""
    worker = faults.worker("--queues", f"{QUEUE},emails", "--concurrency", "1", env=ENV)
    faults.wait_ready(worker)
    slot = key_slot(QUEUE.encode())
    with busy_queue.half_moved(slot, (busy_queue.node_of(slot) + 1) % len(busy_queue.nodes)):
        fault_noop.using(queue="emails").delay(faults.ledger, "other-slot")
        faults.wait_event("acked", tag="other-slot", timeout=5)
        # It meets the move on its way to the other queue's job, or on its way back to its
        # idle wait right after it: the log line may follow the ack.
        wait_until(
            lambda: "slot is moving" in worker.stderr(),
            timeout=10,
            message="the worker never met the moving slot",
        )
    fault_noop.using(queue=QUEUE).delay(faults.ledger, "moved-slot")
    faults.wait_event("acked", tag="moved-slot", timeout=10)
    assert worker.alive(), worker.report()


def _calls(count: int) -> list[tuple[tuple[str, str], dict[str, Any]]]:
    return [(("unused-ledger", f"c{n}"), {}) for n in range(count)]


def _in_redis(jobs: list[Job[Any]]) -> list[Job[Any]]:
    client = get_client(QUEUE)
    keys = QueueKeys.of(get_config().key_prefix, QUEUE)
    pipe = client.pipeline(transaction=False)
    for job in jobs:
        pipe.exists(keys.job(job.id))
    return [job for job, found in zip(jobs, pipe.execute(), strict=True) if found]


def _move_after_first_batch(cluster: LocalCluster, stack: ExitStack) -> None:
    """Once ``delay_many`` has written its first batch (its first ``job_enqueued``), hold the
    queue's slot half moved to another master until ``stack`` closes."""
    slot = key_slot(QUEUE.encode())
    target = (cluster.node_of(slot) + 1) % len(cluster.nodes)

    begun = threading.Event()

    def begin(**kwargs: object) -> None:
        if not begun.is_set():
            begun.set()
            stack.enter_context(cluster.half_moved(slot, target))

    signals.job_enqueued.connect(begin, weak=False, dispatch_uid="test-reshard-move")
    stack.callback(signals.job_enqueued.disconnect, dispatch_uid="test-reshard-move")


@pytest.mark.parametrize("begins", ["before the call", "after the first batch"])
def test_delay_many_waits_out_a_slot_move_and_writes_each_job_once(
    busy_queue: LocalCluster, begins: str
) -> None:
    with ExitStack() as stack:
        if begins == "before the call":
            slot = key_slot(QUEUE.encode())
            target = (busy_queue.node_of(slot) + 1) % len(busy_queue.nodes)
            stack.enter_context(busy_queue.half_moved(slot, target))
        else:
            _move_after_first_batch(busy_queue, stack)
        timer = threading.Timer(1.0, stack.close)  # the move ends after 1 s
        timer.start()
        jobs = fault_noop.using(queue=QUEUE).delay_many(_calls(2000), batch_size=100)
        timer.join()
    assert len({job.id for job in jobs}) == 2000
    assert _in_redis(jobs) == jobs
    enqueued = get_client(QUEUE).hget(
        QueueKeys.of(get_config().key_prefix, QUEUE).stats, "enqueued"
    )
    assert int(enqueued or 0) == 2000  # none written twice


def test_delay_many_stopped_by_a_slot_move_says_exactly_which_jobs_it_wrote(
    busy_queue: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(write, "ENQUEUE_PATIENCE", 1.0)
    with ExitStack() as stack:
        _move_after_first_batch(busy_queue, stack)
        with pytest.raises(EnqueueIncomplete) as caught:
            fault_noop.using(queue=QUEUE).delay_many(_calls(2000), batch_size=100)
        exc = caught.value
        # Looked up while the slot is still half moved (single-key reads follow ASK).
        assert exc.unknown == []
    assert isinstance(exc, RedisUnavailable) and isinstance(exc.__cause__, RedisUnavailable)
    assert "slot is moving" in str(exc.__cause__)
    assert len(exc.jobs) == 2000
    assert exc.written and exc.not_written
    assert exc.written + exc.not_written == exc.jobs  # batches are written in call order
    assert _in_redis(exc.jobs) == exc.written
