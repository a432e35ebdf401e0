"""Redis ``kill -9`` and restart (AOF, fsync always) with 1 000 jobs in flight: none lost.

A private ``redis-server --appendonly yes --appendfsync always`` is killed
while two workers (two children each) are draining 1 000 small jobs, and
restarted on the same port and data dir once a worker has noticed (logged)
the outage. Every job must end succeeded or
failed, none lost, each completed once by the holder of its final token;
re-runs (the allowed at-least-once duplicates) are counted and printed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pytest_django.fixtures import Settings as SettingsFixture

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
    harness = Faults(tmp_path, client, server.url)
    try:
        yield harness, server
    finally:
        harness.stop_all()
        for process in harness.started:
            print(process.report())
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
