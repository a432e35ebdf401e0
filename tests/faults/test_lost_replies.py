"""The reply to an ack is lost between worker and Redis: the resent ack is accepted, one run.

A :class:`~.proxy.FaultProxy` in ``drop_replies`` mode forwards the ack to
Redis, which applies it, and swallows the reply. The worker cannot tell
"applied" from "not applied", so it must send the ack again; the repeated
ack, fenced by the same token, must be accepted as already done (no error,
no second run, no second ``job_succeeded``).

Two ways the reply goes missing: the connection stays silent until the
client's socket timeout (10 s), or it is reset right after the request.
``SLOWLOG`` (threshold 0) on the real server proves the ack reached Redis
more than once.
"""

from __future__ import annotations

import time

import pytest
import redis

from django_rqueue.engine.connection import SOCKET_TIMEOUT
from django_rqueue.engine.scripts import load
from tests.jobs_app.jobs import fault_sleep

from .harness import Faults, wait_until
from .proxy import FaultProxy

#: Lease in the worker: longer than the stalled ack, so nothing but the lost
#: reply is in play (no renewal or reclaim happens meanwhile).
LEASE = 30.0


def ack_calls(client: redis.Redis, job_id: str) -> int:
    """How many times Redis ran an ack script (ack, ack_reserve) for ``job_id`` (``SLOWLOG``)."""
    shas = (load("ack").sha, load("ack_reserve").sha)
    count = 0
    for entry in client.slowlog_get(100_000):
        command = entry["command"]
        text = command.decode(errors="replace") if isinstance(command, bytes) else str(command)
        if text.lower().startswith("evalsha") and job_id in text and any(s in text for s in shas):
            count += 1
    return count


@pytest.mark.slow
@pytest.mark.parametrize("lost_by", ["timeout", "reset"])
@pytest.mark.usefixtures("slowlog")
def test_lost_ack_reply_is_retried_and_the_job_runs_once(
    faults: Faults, proxy: FaultProxy, redis_client: redis.Redis, lost_by: str
) -> None:
    worker = faults.worker(
        "--queues", "default", "--concurrency", "1", lease=LEASE, redis_url=proxy.url()
    )
    faults.wait_ready(worker)
    # The ack script is cached in Redis (as on any Redis that ran a job before),
    # so the EVALSHA whose reply gets lost is applied, not answered NOSCRIPT.
    redis_client.script_load(load("ack").source)
    redis_client.script_load(load("ack_reserve").source)
    job = fault_sleep.delay(faults.ledger, "j", 1.0)
    faults.wait_event("start", tag="j")
    proxy.set_mode("drop_replies")  # the job still has about 1 s to run: its ack falls in

    # Redis applied the ack; the worker heard nothing back.
    wait_until(
        lambda: faults.state(job.id) == "succeeded", timeout=5, message="the ack never arrived"
    )
    applied_at = time.monotonic()
    # Redis applied it before its reply reached the proxy, which drops it in its own thread.
    wait_until(lambda: proxy.stats.dropped_down > 0, timeout=2, message="no reply was dropped")
    assert faults.events("acked") == [], "the worker cannot know its ack was applied"
    if lost_by == "reset":
        proxy.set_mode("pass", reset=True)  # ECONNRESET right away
    else:
        wait_until(  # the reply of this very ack is gone for good
            lambda: ack_calls(redis_client, job.id) >= 1, timeout=2, message="ack not in SLOWLOG"
        )
        proxy.set_mode("pass")  # the worker waits out its socket timeout

    acked = faults.wait_event("acked", tag="j", timeout=SOCKET_TIMEOUT + 10)
    print(f"{lost_by}: ack confirmed {time.monotonic() - applied_at:.1f} s after it was applied")
    assert ack_calls(redis_client, job.id) >= 2, "the ack was not sent again"

    report = faults.wait_and_check([job.id], timeout=5)
    assert report.states[job.id] == "succeeded"
    assert report.starts[job.id] == 1 and report.duplicates == {}
    assert len(faults.events("end", tag="j")) == 1
    assert acked["token"] == int(report.jobs[job.id]["token"])
    assert report.jobs[job.id]["attempts"] == "1"
    assert "discard" not in worker.stderr()  # the repeated ack was not taken for a lost lease
    assert worker.alive()
