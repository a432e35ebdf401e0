"""A reservation whose reply reaches the worker after the reserved job's lease ran out.

The worker talks to Redis through a :class:`~.proxy.FaultProxy` that holds
the replies (``hold_replies``): Redis applies the worker's ack-and-reserve at
once, the worker hears back only later, as when the network delays the reply
or the worker is paused (SIGSTOP, a VM freeze) between request and reply.
Meanwhile the reserved job's lease (1 s) runs out and a poller, reaching
Redis directly, re-queues it. The worker must not run that stale
reservation: its outcome would be discarded, and the job would run twice.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis

from django_rqueue.engine.scripts import load
from tests.jobs_app.jobs import fault_gate, fault_noop
from tests.support.redis_commands import wait_blocked

from .harness import Faults, job_hash, wait_until
from .proxy import FaultProxy

LEASE = 1.0


@pytest.mark.slow
def test_a_job_reserved_with_an_ack_whose_reply_comes_after_its_lease_is_not_run_there(
    faults: Faults, proxy: FaultProxy, redis_client: redis.Redis, tmp_path: Path
) -> None:
    worker = faults.worker(
        "--queues",
        "default",
        "--concurrency",
        "1",
        "--without-poller",
        lease=LEASE,
        redis_url=proxy.url(),
    )
    faults.command("rqueue_poller", "--queues", "default", lease=LEASE)
    faults.wait_ready(worker)
    wait_blocked(redis_client, 2)  # the worker child and the poller
    # Scripts cached in Redis (as on any Redis that ran jobs before): the held
    # requests are applied, not answered NOSCRIPT.
    for name in ("ack_reserve", "renew", "reserve"):
        load(name).ensure_loaded(redis_client)
    gate = tmp_path / "gate"
    first = fault_gate.delay(faults.ledger, "first", str(gate))
    faults.wait_event("start", tag="first")
    second = fault_noop.delay(faults.ledger, "second")  # reserved with first's ack

    proxy.set_mode("hold_replies")
    gate.touch()  # first returns; its ack-and-reserve reaches Redis, the reply waits
    wait_until(
        lambda: faults.state(first.id) == "succeeded" and faults.state(second.id) == "running",
        timeout=5,
        message="the ack-and-reserve did not reach Redis",
    )
    held_at = time.monotonic()
    stale_token = job_hash(redis_client, second.id)["token"]
    wait_until(
        lambda: job_hash(redis_client, second.id)["token"] != stale_token,
        timeout=LEASE + 5,  # well under the worker's 10 s socket timeout
        message="the poller did not re-queue the job whose lease ran out",
    )
    assert faults.events("start", tag="second") == []
    proxy.set_mode("pass")  # the reply, with second's stale reservation, arrives
    print(f"reply held {time.monotonic() - held_at:.2f} s (lease {LEASE} s)")

    report = faults.wait_and_check([first.id, second.id], timeout=15)
    assert set(report.states.values()) == {"succeeded"}
    starts = faults.events("start", tag="second")
    assert report.starts[second.id] == 1, f"second ran under its stale reservation: {starts}"
    assert starts[0]["attempt"] == 2  # the attempt whose lease ran out counts
    assert report.jobs[second.id]["attempts"] == "2"
    assert "skipping it" in worker.stderr()
    assert worker.alive()
