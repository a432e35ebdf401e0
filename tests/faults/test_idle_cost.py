"""Eight idle workers send Redis few commands a second; one job enqueued then runs exactly once.

Eight ``rqueue_work --concurrency 1`` supervisors (each a master, a worker
child and a poller child: 24 processes, which a 2-core host starts in a few
seconds) sit idle while the test counts what reaches Redis over a window:

- client commands, from ``MONITOR`` (what the workers send), and
- every command Redis ran, from ``INFO commandstats`` deltas (this also
  counts the commands executed inside the Lua scripts).

The figures are printed; the assertion is a generous bound only, because
precise idle-cost figures belong to ``bench/``. The workers use the
production lease (30 s, heartbeat every 5 s): the suite's 2 s lease would
heartbeat every 0.7 s and measure the test setting, not the product.
Then one job is enqueued: exactly one of the eight runs it, once.
"""

from __future__ import annotations

import pytest
import redis

from tests.jobs_app.jobs import fault_noop
from tests.support.redis_commands import CommandMonitor, command_calls, hold, wait_blocked
from tests.support.redis_server import RedisServer

from .harness import Faults

WORKERS = 8
LEASE = 30.0
#: Seconds of idleness measured (two cycles of the 4-5 s idle timers).
WINDOW = 10.0
#: Generous bound on client commands per second per idle worker (the aim is about 2).
BOUND = 5.0


@pytest.mark.slow
def test_eight_idle_workers_cost_little_and_one_job_runs_once(
    faults: Faults, redis_client: redis.Redis, redis_server: RedisServer
) -> None:
    workers = [
        faults.worker("--queues", "default", "--concurrency", "1", lease=LEASE)
        for _ in range(WORKERS)
    ]
    for worker in workers:
        faults.wait_ready(worker)
    wait_blocked(redis_client, 2 * WORKERS)  # every worker child and poller child idle

    before = command_calls(redis_client)
    with CommandMonitor(redis_server.port) as monitor:
        hold(WINDOW, lambda: all(w.alive() for w in workers), "a worker exited while idle")
    after = command_calls(redis_client)
    executed = {k: n - before.get(k, 0) for k, n in after.items() if n > before.get(k, 0)}
    executed["info"] = executed.get("info", 0) - 1  # our own first INFO
    sent = sum(monitor.calls.values())
    client_rate = sent / monitor.seconds / WORKERS
    redis_rate = sum(executed.values()) / monitor.seconds / WORKERS
    print(
        f"{WORKERS} idle workers over {monitor.seconds:.1f} s: "
        f"{client_rate:.2f} client commands/s per worker "
        f"({dict(monitor.calls.most_common())}); "
        f"{redis_rate:.2f} commands/s per worker executed by Redis incl. inside scripts "
        f"({dict(sorted(executed.items(), key=lambda kv: -kv[1]))})"
    )
    assert client_rate < BOUND, f"idle workers send {client_rate:.1f} commands/s each"
    assert "keys" not in executed and "scan" not in executed

    job = fault_noop.delay(faults.ledger, "one")
    report = faults.wait_and_check([job.id], timeout=10)
    assert report.states[job.id] == "succeeded"
    assert report.starts[job.id] == 1  # a succeeded job is never queued again
    assert all(w.alive() for w in workers)
