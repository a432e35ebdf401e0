"""Redis ``kill -9`` and restart (AOF, fsync always) with 1 000 jobs in flight: none lost.

A private ``redis-server --appendonly yes --appendfsync always`` is killed
while two workers (two children each) are draining 1 000 small jobs, and
restarted on the same port and data dir once a worker has noticed (logged)
the outage. Every job must end succeeded or
failed, none lost, each completed once by the holder of its final token;
re-runs (the allowed at-least-once duplicates) are counted and printed.

A ``delay_many`` cut short by the kill raises ``EnqueueIncomplete``: the jobs it
lists as written are in Redis after the restart, those not written are not, and
only those it lists as unknown (sent, reply lost) may be either.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from pytest_django.fixtures import Settings as SettingsFixture

from django_rqueue import signals
from django_rqueue.conf import get_config
from django_rqueue.engine.keys import QueueKeys
from django_rqueue.enqueue import write
from django_rqueue.exceptions import EnqueueIncomplete
from tests.jobs_app.jobs import fault_noop
from tests.support.redis_server import RedisServer

from .harness import Faults, wait_until

TOTAL = 1000


@pytest.fixture
def aof_faults(tmp_path: Path, settings: SettingsFixture) -> Iterator[tuple[Faults, RedisServer]]:
    """A :class:`Faults` on its own AOF-always Redis (the test process points at it too)."""
    server = RedisServer(["--appendonly", "yes", "--appendfsync", "always"]).start()
    settings.RQUEUE = {**settings.RQUEUE, "REDIS_URL": server.url}
    client = server.client()
    try:
        with Faults.session(tmp_path, client, server.url) as harness:
            yield harness, server
    finally:
        client.close()
        server.close()


@pytest.mark.slow
def test_redis_kill9_and_restart_with_1000_jobs_in_flight_loses_nothing(
    aof_faults: tuple[Faults, RedisServer],
) -> None:
    faults, server = aof_faults
    workers = [
        faults.worker("--queues", "default", "--concurrency", "2", lease=2, grace=1)
        for _ in range(2)
    ]
    for worker in workers:
        faults.wait_ready(worker)
    ids = [j.id for j in fault_noop.delay_many(((faults.ledger, str(n)), {}) for n in range(TOTAL))]

    wait_until(lambda: len(faults.events("acked")) >= TOTAL // 5, timeout=30, interval=0.005)
    server.kill9()
    done_at_kill = len(faults.events("acked"))
    print(f"Redis killed with {done_at_kill}/{TOTAL} jobs acked")
    assert done_at_kill < TOTAL, "every job finished before the kill: nothing was in flight"
    wait_until(
        lambda: any(outage_logged(w.stderr()) for w in workers),
        timeout=15,
        interval=0.05,
        message="no worker noticed that Redis is down",
    )
    server.restart()

    report = faults.wait_and_check(ids, timeout=60)

    counts = {s: list(report.states.values()).count(s) for s in set(report.states.values())}
    print(f"final states: {counts}; re-run jobs: {len(report.duplicates)}")
    assert set(report.states.values()) <= {"succeeded", "failed"}
    assert all(worker.alive() for worker in workers)


def outage_logged(log: str) -> bool:
    return any(
        " ERROR " in line or (" WARNING " in line and "rqueue.W010" not in line)
        for line in log.splitlines()
    )


def test_delay_many_cut_by_a_redis_crash_lists_the_jobs_written_not_written_and_unknown(
    aof_faults: tuple[Faults, RedisServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    faults, server = aof_faults
    monkeypatch.setattr(write, "ENQUEUE_PATIENCE", 0.5)
    killed = threading.Event()

    def kill_after_first_batch(**kwargs: object) -> None:
        if not killed.is_set():
            killed.set()
            server.kill9()

    signals.job_enqueued.connect(kill_after_first_batch, weak=False, dispatch_uid="test-kill")
    try:
        with pytest.raises(EnqueueIncomplete) as caught:
            fault_noop.delay_many(
                (((faults.ledger, str(n)), {}) for n in range(2000)), batch_size=100
            )
    finally:
        signals.job_enqueued.disconnect(dispatch_uid="test-kill")
    exc = caught.value
    server.restart()

    keys = QueueKeys.of(get_config().key_prefix, "default")
    pipe = faults.client.pipeline(transaction=False)
    for job in exc.jobs:
        pipe.exists(keys.job(job.id))
    in_redis = [job for job, found in zip(exc.jobs, pipe.execute(), strict=True) if found]
    assert exc.written == exc.jobs[:100]  # the batch whose reply was read before the kill
    assert exc.unknown  # the batches sent with it: their replies were lost
    assert exc.written + exc.unknown + exc.not_written == exc.jobs
    assert in_redis[: len(exc.written)] == exc.written
    assert all(job in exc.unknown for job in in_redis[len(exc.written) :])
