"""An idle worker of one queue reserves behind its wake-up ``BLPOP``; a stop while idle
leaves no job reserved.

``rqueue_work --concurrency 1`` on one queue sends the reserve its next round
would send in the same write as its idle ``BLPOP`` (``worker/loop.py``,
``_wait_for_work``), so Redis reserves the job the moment the wake-up token
comes. ``SLOWLOG`` (threshold 0; a blocking command is logged when it is
served) shows, per connection and in the order Redis ran them, that the
reserve came right behind the ``BLPOP`` on the blocked connection and that no
other reserve was needed before the job's ack.

A stop (SIGTERM to the master, which stops its idle child with a signal that
raises in the wait) at the moment a job comes: whatever the pipelined reserve
got is handed back (or ran), never left reserved.
"""

from __future__ import annotations

import signal
from typing import Any

import pytest
import redis

from django_rqueue.conf import get_config
from django_rqueue.engine.keys import QueueKeys
from django_rqueue.engine.scripts import load
from tests.jobs_app.jobs import fault_noop
from tests.support.redis_commands import wait_blocked

from .harness import Faults


def words(entry: dict[str, Any]) -> str:
    """A ``SLOWLOG`` entry's command line, as text."""
    command = entry["command"]
    return command.decode(errors="replace") if isinstance(command, bytes) else str(command)


@pytest.mark.slow
@pytest.mark.usefixtures("slowlog")
def test_a_job_enqueued_while_idle_is_reserved_behind_the_wake_up_blpop(
    faults: Faults, redis_client: redis.Redis
) -> None:
    notify = QueueKeys.of(get_config().key_prefix, "default").notify
    reserve, acks = load("reserve").sha, (load("ack").sha, load("ack_reserve").sha)
    worker = faults.worker("--queues", "default", "--concurrency", "1")
    faults.wait_ready(worker)
    wait_blocked(redis_client, 2)  # the worker child and the poller child
    redis_client.slowlog_reset()

    job = fault_noop.delay(faults.ledger, "picked")
    report = faults.wait_and_check([job.id], timeout=10)
    assert report.states[job.id] == "succeeded" and report.starts[job.id] == 1

    log = sorted(redis_client.slowlog_get(100_000), key=lambda e: int(e["id"]))
    woke = next(i for i, e in enumerate(log) if words(e).startswith("BLPOP") and notify in words(e))
    blocked = log[woke]["client_address"]
    acked = next(
        i for i, e in enumerate(log) if any(sha in words(e) for sha in acks) and job.id in words(e)
    )
    assert woke < acked
    # The blocked connection's next command is the reserve it sent with the BLPOP ...
    following = [e for e in log[woke + 1 :] if e["client_address"] == blocked]
    assert words(following[0]).startswith("EVALSHA") and reserve in words(following[0])
    # ... and it is the only reserve between the wake-up and the job's ack.
    reserves = [e for e in log[woke + 1 : acked] if reserve in words(e)]
    assert [e["client_address"] for e in reserves] == [blocked]


@pytest.mark.slow
def test_sigterm_while_idle_as_a_job_comes_leaves_no_job_reserved(
    faults: Faults, redis_client: redis.Redis
) -> None:
    reserved = QueueKeys.of(get_config().key_prefix, "default").reserved
    ids: list[str] = []
    for enqueue_first in (True, False, True, False):
        worker = faults.worker("--queues", "default", "--concurrency", "1")
        faults.wait_ready(worker)
        wait_blocked(redis_client, 2)
        if enqueue_first:
            ids.append(fault_noop.delay(faults.ledger, f"round-{len(ids)}").id)
            worker.signal(signal.SIGTERM)
        else:
            worker.signal(signal.SIGTERM)
            ids.append(fault_noop.delay(faults.ledger, f"round-{len(ids)}").id)
        assert worker.wait(timeout=15) == 0
        assert redis_client.zcard(reserved) == 0, "a job was left reserved"
        assert faults.state(ids[-1]) in ("queued", "succeeded")

    faults.worker("--queues", "default", "--concurrency", "1")
    report = faults.wait_and_check(ids, timeout=30)
    assert all(report.states[i] == "succeeded" for i in ids)
    assert all(report.starts[i] == 1 for i in ids)  # none ran twice, none was lost
