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

import threading
import time
from typing import Any

import pytest
import redis
from pytest_django.fixtures import Settings as SettingsFixture

from django_rqueue.engine import commands, run
from django_rqueue.engine.connection import SOCKET_TIMEOUT, reset_clients
from django_rqueue.engine.queue_ref import queue_ref
from django_rqueue.engine.scripts import load
from django_rqueue.job import Job
from django_rqueue.worker.reserve_params import ReserveParams
from tests.jobs_app.jobs import fault_sleep, record
from tests.support import transitions
from tests.support.inprocess import keys

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


def test_an_ack_and_reserve_whose_reply_is_lost_is_sent_again_as_the_same_request(
    proxy: FaultProxy,
    redis_client: redis.Redis,
    settings: SettingsFixture,
    ledger: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The ack of ``a`` reserves ``b`` and ``c`` in the same call; Redis applies it, the reply
    is lost and Redis stays unreachable past redis-py's own retries. Sent again as the same
    request once Redis answers, it acks nothing twice and hands back ``b`` and ``c``: they
    are not left reserved by no one until their lease runs out, each charged an attempt."""
    a, b, c = (record.delay(ledger, tag).id for tag in "abc")
    held = transitions.reserve(redis_client, keys(), lease_ms=60_000, worker_id="w")
    assert held is not None and held[0] == a
    token = int(held[1][b"token"])
    redis_client.script_load(load("ack_reserve").source)  # applied, not answered NOSCRIPT
    settings.RQUEUE = {**settings.RQUEUE, "REDIS_URL": proxy.url()}
    reset_clients()
    params = ReserveParams(queue_ref("default"), "w")
    job = Job.from_fields(a, held[1])
    outcome: dict[str, Any] = {}
    connected, dropping = threading.Event(), threading.Event()

    def ack_and_reserve() -> None:
        # Script calls go on a connection of this thread's own: open it (and have its
        # handshake answered) with a reserve of the empty queue emails, before the drop.
        emails = ReserveParams(queue_ref("emails"), "w")
        run.execute(emails.ref.client(), commands.reserving(emails.reserve(1)))
        connected.set()
        dropping.wait(timeout=10)
        try:
            outcome["reply"] = params.ack_and_reserve(job, '"done"', 2)
        except Exception as exc:  # reported by the assertion below
            outcome["error"] = exc

    thread = threading.Thread(target=ack_and_reserve)
    thread.start()
    try:
        assert connected.wait(timeout=10)
        proxy.set_mode("drop_replies")
        dropping.set()
        wait_until(
            lambda: transitions.read_job(redis_client, keys(), a).get(b"s") == b"succeeded",
            timeout=5,
            message="the ack never arrived",
        )
        proxy.set_mode("refuse")  # the lost reply's connection reset; no new one accepted
        wait_until(  # redis-py's own retries are spent
            lambda: "sending the same request again" in caplog.text,
            timeout=10,
            message="the request was not sent again",
        )
        proxy.set_mode("pass")
    finally:
        thread.join(timeout=30)
        reset_clients()

    assert "error" not in outcome, outcome
    stale, reserved = outcome["reply"]
    assert stale is None
    assert [job_id for job_id, _fields in reserved.jobs] == [b, c]  # the first send's jobs
    assert set(redis_client.zrange(keys().reserved, 0, -1)) == {b.encode(), c.encode()}
    for job_id in (b, c):
        assert transitions.read_job(redis_client, keys(), job_id)[b"attempts"] == b"1"
    assert int(transitions.read_job(redis_client, keys(), a)[b"token"]) == token
