"""Redis unreachable for 10 s with workers idle and busy: nothing lost or run twice, all recover.

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
wait allows one lease for it. The reserve an idle child sends with its
``BLPOP`` is the exception: the child sends it again with the same request id
and gets that job back.
"""

from __future__ import annotations

import time

import pytest
import redis

from django_rqueue.conf import get_config
from django_rqueue.engine.keys import QueueKeys
from tests.jobs_app.jobs import fault_noop, fault_sleep, fault_sleep_first
from tests.support.redis_commands import hold, wait_blocked

from .harness import Faults, alive, wait_until
from .proxy import FaultProxy, Mode

#: Seconds Redis is unreachable. A blackhole lasts longer than the client's
#: socket timeout (10 s, :data:`django_rqueue.engine.connection.SOCKET_TIMEOUT`), so
#: that hung calls time out and reconnect into the blackhole again.
OUTAGE: dict[Mode, float] = {"refuse": 10.0, "blackhole": 12.0}
#: Lease in the workers: longer than any outage plus a renew interval (lease / 3),
#: so that no running job's reservation can expire.
LEASE = 30.0
#: Worker children: two busy across the outage, one idle.
CONCURRENCY = 3


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
    # The idle child sent its next reserve with its BLPOP before the outage: in a
    # blackhole, Redis runs it when the first job comes and the reply is held (the
    # child asks again with the same request id once Redis is back, and runs that job).
    states = [faults.state(j.id) for j in during]
    assert states.count("running") <= (1 if mode == "blackhole" else 0), states
    assert states.count("queued") + states.count("running") == len(during), states

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
    if mode == "refuse":  # the master backs off: one warning, then one "reachable again"
        master_log = [line for line in worker.stderr().splitlines() if ".supervisor:" in line]
        assert sum("unreachable" in line for line in master_log) == 1, master_log
        assert sum("reachable again" in line for line in master_log) == 1, master_log
    redelivered = sorted(i for i, fields in report.jobs.items() if fields["attempts"] != "1")
    print(f"{mode}: re-delivered after a lost reserve reply: {redelivered or 'none'}")
    assert worker.alive() and set(worker.children()) == children
    assert time.monotonic() - down_at < OUTAGE[mode] + 40


#: Lease for the next scenario: renewals every 3 s; the outage spans two of them.
SHORT_LEASE = 9.0
SHORT_OUTAGE = 7.0


@pytest.mark.slow
def test_a_job_running_across_an_outage_shorter_than_its_lease_keeps_it(
    faults: Faults, proxy: FaultProxy, redis_client: redis.Redis
) -> None:
    """The master renews as soon as Redis is back, not only at its next lease/3 slot.

    The worker reaches Redis through the proxy; a poller reaches it directly
    and would reclaim the job the moment its lease expired. The outage starts
    right after a renewal, is shorter than the lease, and spans the next two
    renewal slots: a master that waited for its next slot after each failed
    renewal would renew right at the deadline and lose the race to the
    poller, and the job would run twice.
    """
    worker = faults.worker(
        "--queues",
        "default",
        "--concurrency",
        "1",
        "--without-poller",
        lease=SHORT_LEASE,
        redis_url=proxy.url(),
    )
    poller = faults.command("rqueue_poller", "--queues", "default")
    faults.wait_ready(worker)
    wait_blocked(redis_client, 2)  # the worker child and the poller
    job = fault_sleep.delay(faults.ledger, "long", SHORT_LEASE + SHORT_OUTAGE - 3)
    faults.wait_event("start", tag="long")
    reserved = QueueKeys.of(get_config().key_prefix, "default").reserved
    first = redis_client.zscore(reserved, job.id)
    assert first is not None
    wait_until(
        lambda: (redis_client.zscore(reserved, job.id) or 0) > first,
        timeout=SHORT_LEASE,
        interval=0.02,
        message="the lease was never renewed",
    )

    proxy.set_mode("refuse")
    hold(SHORT_OUTAGE, worker.alive, "the worker exited during the outage")
    proxy.set_mode("pass")

    report = faults.wait_and_check([job.id], timeout=3 * SHORT_LEASE)
    assert report.states[job.id] == "succeeded"
    assert "reclaimed" not in poller.stderr(), "the lease expired although Redis came back in time"
    assert report.starts[job.id] == 1 and report.duplicates == {}
    assert report.jobs[job.id]["attempts"] == "1"


#: Lease for the next scenario (renewals every 2 s) and the cut-off: 0.8 of a lease.
CUT_LEASE = 6.0
CUT = 0.8 * CUT_LEASE
#: Seconds before the master's next renewal at which the cut-off begins.
BEFORE_RENEWAL = 0.15


@pytest.mark.slow
def test_a_cut_off_shorter_than_a_lease_but_past_two_thirds_of_it_can_cause_a_second_run(
    faults: Faults, proxy: FaultProxy, redis_client: redis.Redis
) -> None:
    """The other side of the previous scenario, as the README's delivery guarantee says.

    The cut-off (0.8 of a lease) begins just before the master's next
    renewal, when the lease has only about two thirds of it left: the lease
    runs out during the cut-off, a poller reaching Redis directly re-queues
    the job, and a second worker runs it while the first run still goes on.
    Once Redis is reachable again the first worker's master sees its renewal
    refused and kills that run; the second run's outcome is the one that counts.
    """
    cut_off = faults.worker(
        "--queues",
        "default",
        "--concurrency",
        "1",
        "--without-poller",
        lease=CUT_LEASE,
        redis_url=proxy.url(),
    )
    faults.command("rqueue_poller", "--queues", "default", lease=CUT_LEASE)
    faults.wait_ready(cut_off)
    job = fault_sleep_first.delay(faults.ledger, "j", 60)  # only the first attempt is long
    first = faults.wait_event("start", tag="j")
    other = faults.worker(
        "--queues", "default", "--concurrency", "1", "--without-poller", lease=CUT_LEASE
    )
    faults.wait_ready(other)
    reserved = QueueKeys.of(get_config().key_prefix, "default").reserved

    def deadline_ms() -> float:
        return redis_client.zscore(reserved, job.id) or 0.0

    for _ in range(3):  # a retry only if the test itself was too slow to begin in time
        before = deadline_ms()
        wait_until(
            lambda: deadline_ms() > before,  # noqa: B023 - used within this iteration
            timeout=CUT_LEASE,
            interval=0.02,
            message="the lease was never renewed",
        )
        renewed_at = time.monotonic()  # the next renewal is due LEASE/3 after this
        hold(CUT_LEASE / 3 - BEFORE_RENEWAL, cut_off.alive, "the worker exited")
        proxy.set_mode("refuse")
        down_at = time.monotonic()
        seconds, micros = redis_client.time()
        left = (deadline_ms() - (seconds * 1000 + micros // 1000)) / 1000
        if left < CUT - 0.3:
            break
        proxy.set_mode("pass")  # that renewal went through: try again at the next one
    else:
        raise AssertionError("could not begin the cut-off before a renewal")
    print(f"cut off {down_at - renewed_at:.2f} s after a renewal, lease left {left:.2f} s")
    assert left < CUT  # about 2/3 of the lease: the lease runs out during the cut-off

    within_cut = CUT - (time.monotonic() - down_at)
    second = faults.wait_event("start", tag="j", count=2, timeout=within_cut)
    rerun_after = time.monotonic() - down_at
    hold(CUT - rerun_after, cut_off.alive, "the cut-off worker exited")
    proxy.set_mode("pass")
    print(f"re-run by the other worker {rerun_after:.2f} s into a {CUT:.1f} s cut-off")
    assert rerun_after < CUT < CUT_LEASE
    assert second["attempt"] == 2 and second["token"] > first["token"]
    assert second["pid"] in other.children()

    wait_until(lambda: not alive(first["pid"]), timeout=5, message="the stale run was not killed")
    report = faults.wait_and_check([job.id], timeout=10)
    assert report.states[job.id] == "succeeded"
    assert report.duplicates == {job.id: 2}
    assert report.jobs[job.id]["token"] == str(second["token"])  # the second run's ack counts
    assert [e["type"] for e in report.errors(job.id)] == ["django_rqueue.exceptions.LeaseExpired"]
    ends = faults.events("end", tag="j")
    assert len(ends) == 1 and ends[0]["pid"] == second["pid"]  # the first run never ended
    assert "lease lost" in cut_off.stderr()


@pytest.mark.slow
def test_the_master_signals_an_outage_once_and_its_end_once(
    faults: Faults, proxy: FaultProxy
) -> None:
    """``redis_unavailable`` then ``redis_recovered``, once each per outage, also when the
    outage begins before the worker could start; heartbeats during it send nothing more."""
    env = {"RQUEUE_TEST_OUTAGE_LEDGER": faults.ledger}
    proxy.set_mode("refuse", reset=True)  # Redis unreachable from the start
    worker = faults.worker("--queues", "default", redis_url=proxy.url(), env=env)
    first = faults.wait_event("redis_unavailable", timeout=30)
    assert "unreachable" in first["error"].lower() or "connect" in first["error"].lower()
    proxy.set_mode("pass")
    faults.wait_event("redis_recovered", timeout=30)
    faults.wait_ready(worker)

    proxy.set_mode("refuse", reset=True)  # an outage while it runs
    faults.wait_event("redis_unavailable", count=2, timeout=30)
    # Two heartbeats (5 s apart) and many backed-off retries fail meanwhile: still one signal.
    hold(12, lambda: len(faults.events("redis_unavailable")) == 2, "a second signal")
    proxy.set_mode("pass")
    second = faults.wait_event("redis_recovered", count=2, timeout=30)
    assert second["downtime"] >= 10
    hold(6, lambda: len(faults.events("redis_recovered")) == 2, "a third recovered signal")
    assert len({e["tag"] for e in faults.events()}) == 1  # one master's worker id
    assert worker.alive()
