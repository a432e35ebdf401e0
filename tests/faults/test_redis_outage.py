"""Scenario 8 of issue 3: Redis unreachable for 10 s while workers are idle and busy.

The worker talks to Redis through a :class:`~.proxy.FaultProxy`; the test
talks to Redis directly, so it can enqueue and watch during the outage. The
lease is longer than the outage, so no running job's reservation may expire
meanwhile and no job may run twice: a worker that recovers by itself
delivers every pending ack, and every child (idle or busy) is serving again
afterwards.

A blackhole holds bytes like a partitioned TCP link and delivers them when
it heals, also those of a request whose client gave up meanwhile (socket
timeout). If that request was a reserve, Redis reserves a job for nobody:
its reply is lost, and the job comes back when that lease expires (attempt
2, still run once). That is the at-least-once price of a lost reply, so the
wait allows one lease for it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from tests.jobs_app.jobs import fault_noop, fault_sleep
from tests.redis_server import RedisServer

from .harness import Faults
from .proxy import FaultProxy, Mode
from .support import hold, wait_blocked

#: Seconds Redis is unreachable. A blackhole lasts longer than the client's
#: socket timeout (10 s, :data:`django_rqueue.connection.SOCKET_TIMEOUT`), so
#: that hung calls time out and reconnect into the blackhole again.
OUTAGE: dict[Mode, float] = {"refuse": 10.0, "blackhole": 12.0}
#: Lease in the workers: longer than any outage plus a renew interval (lease / 3),
#: so that no running job's reservation can expire.
LEASE = 30.0
#: Worker children: two busy across the outage, one idle.
CONCURRENCY = 3


@pytest.fixture
def proxy(redis_server: RedisServer) -> Iterator[FaultProxy]:
    with FaultProxy(redis_server.port) as running:
        yield running


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["refuse", "blackhole"])
def test_redis_unreachable_for_10s_workers_idle_and_busy_recover(
    faults: Faults, proxy: FaultProxy, redis_client: redis.Redis, mode: Mode
) -> None:
    worker = faults.worker(
        "--queues", "default", "--concurrency", str(CONCURRENCY), lease=LEASE, redis_url=proxy.url()
    )
    faults.wait_ready(worker)
    children = set(worker.children())  # the worker children and the poller child
    busy = [fault_sleep.delay(faults.ledger, f"busy{i}", 3) for i in range(2)]
    for i in range(2):
        faults.wait_event("start", tag=f"busy{i}")

    # refuse: connections reset, reconnects refused. blackhole: connections
    # hang (requests and replies held) until the client's socket timeout.
    proxy.set_mode(mode, reset=mode == "refuse")
    down_at = time.monotonic()
    during = [fault_noop.delay(faults.ledger, f"during{i}") for i in range(20)]
    hold(
        OUTAGE[mode],
        lambda: worker.alive() and set(worker.children()) == children,
        "a worker process exited during the outage",
    )
    # The busy jobs finished their bodies meanwhile; no ack could reach Redis.
    assert len(faults.events("end")) == 2
    assert faults.events("acked") == []
    assert all(faults.state(j.id) == "running" for j in busy)
    assert all(faults.state(j.id) == "queued" for j in during)

    proxy.set_mode("pass")
    up_at = time.monotonic()
    faults.wait_final([j.id for j in busy + during], timeout=LEASE + 10)
    recovered = time.monotonic() - up_at
    print(f"{mode}: {OUTAGE[mode]:.0f} s outage; pending work done {recovered:.1f} s after it")

    # Every child recovered by itself: all of them (and the poller) block on
    # Redis again, and three concurrent jobs run in three different children.
    wait_blocked(redis_client, CONCURRENCY + 1, timeout=15)
    after = [fault_sleep.delay(faults.ledger, f"after{i}", 1) for i in range(CONCURRENCY)]
    pids = {faults.wait_event("start", tag=f"after{i}")["pid"] for i in range(CONCURRENCY)}
    assert len(pids) == CONCURRENCY and pids <= children, "not every child serves again"
    print(f"{mode}: every child serving again {time.monotonic() - up_at:.1f} s after the outage")

    report = faults.wait_and_check([j.id for j in busy + during + after], timeout=10)
    assert set(report.states.values()) == {"succeeded"}
    assert report.duplicates == {}, "a job ran twice although no lease expired"
    redelivered = sorted(i for i, fields in report.jobs.items() if fields["attempts"] != "1")
    print(f"{mode}: re-delivered after a lost reserve reply: {redelivered or 'none'}")
    assert worker.alive() and set(worker.children()) == children
    assert time.monotonic() - down_at < OUTAGE[mode] + 40
