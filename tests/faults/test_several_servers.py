"""Real ``rqueue_work`` processes serving queues on two redis-servers (per-queue ``REDIS_URL``).

``default`` lives on the session server, ``emails`` on a second one (the
``other_redis_server`` fixture; the subprocesses get the same through
``RQUEUE_TEST_QUEUE_OPTIONS``). A worker wakes for a job on either within
milliseconds, starts when only one answers, and keeps serving the one that
answers while the other is down.
"""

from __future__ import annotations

import json
import time

import redis

from django_rqueue.conf import get_config
from django_rqueue.engine.keys import workers_key
from tests.jobs_app.jobs import fault_noop
from tests.support.redis_commands import hold
from tests.support.redis_server import RedisServer

from .harness import Faults, WorkerProcess, wait_until

#: A wake-up this fast cannot come from the idle wait's timeout (``IDLE_BLOCK``, 4 s).
PROMPT = 1.0


def two_server_worker(faults: Faults, other: RedisServer) -> WorkerProcess:
    env = {"RQUEUE_TEST_QUEUE_OPTIONS": json.dumps({"emails": {"REDIS_URL": other.url}})}
    return faults.worker("--queues", "default,emails", "--concurrency", "1", lease=2, env=env)


def started_within(faults: Faults, queue: str, tag: str) -> float:
    """Enqueue a job on ``queue``; return the seconds until it started."""
    enqueued = time.time()
    fault_noop.using(queue=queue).delay(faults.ledger, tag)
    start = faults.wait_event("start", tag=tag, timeout=15)
    return float(start["t"]) - enqueued


def test_an_idle_worker_wakes_for_a_job_on_either_server_within_milliseconds(
    faults: Faults, other_redis_server: RedisServer
) -> None:
    worker = two_server_worker(faults, other_redis_server)
    faults.wait_ready(worker)
    started_within(faults, "default", "warm")  # imports done, the worker idle again

    for n, queue in enumerate(["emails", "default", "emails"]):
        assert started_within(faults, queue, f"{queue}-{n}") < PROMPT


def test_a_worker_starts_with_one_server_down_and_serves_it_once_it_is_back(
    faults: Faults, rqueue_redis: redis.Redis, other_redis_server: RedisServer
) -> None:
    other_redis_server.stop()
    worker = two_server_worker(faults, other_redis_server)
    faults.wait_ready(worker)
    assert "starting without it" in worker.stderr()
    assert "queue 'emails'" in worker.stderr()

    assert started_within(faults, "default", "up") < PROMPT

    other_redis_server.restart()
    fault_noop.using(queue="emails").delay(faults.ledger, "back")
    faults.wait_event("acked", tag="back", timeout=15)  # within the backoff (at most 5 s)


def test_a_worker_keeps_serving_the_healthy_server_while_the_other_is_down(
    faults: Faults, rqueue_redis: redis.Redis, other_redis_server: RedisServer
) -> None:
    worker = two_server_worker(faults, other_redis_server)
    faults.wait_ready(worker)
    children = set(worker.children())
    started_within(faults, "emails", "before")
    # Acked before the kill: a report still due to the dead server keeps its child
    # retrying it (for up to a minute, documented), not serving the healthy one.
    faults.wait_event("acked", tag="before", timeout=15)

    other_redis_server.kill9()
    for n in range(5):
        assert started_within(faults, "default", f"during-{n}") < PROMPT
    hold(
        1.0,
        lambda: worker.alive() and set(worker.children()) == children,
        f"a process died (children were {sorted(children)})",
    )

    other_redis_server.restart()
    fault_noop.using(queue="emails").delay(faults.ledger, "after")
    faults.wait_event("acked", tag="after", timeout=15)
    wait_until(lambda: len(faults.events("acked")) == 7, timeout=5)  # each job once


def test_a_worker_of_queues_on_their_own_server_starts_while_the_global_one_is_down(
    faults: Faults, other_redis_server: RedisServer
) -> None:
    """``REDIS_URL`` (the workers registry, restart requests) does not answer; ``emails`` has
    a Redis of its own that does: the worker serves it, and registers once the other answers."""
    down = RedisServer().start()
    down.stop()
    env = {
        "RQUEUE_TEST_QUEUE_OPTIONS": json.dumps({"emails": {"REDIS_URL": other_redis_server.url}})
    }
    worker = faults.worker("--queues", "emails", "--concurrency", "1", redis_url=down.url, env=env)
    try:
        faults.wait_ready(worker)
        assert started_within(faults, "emails", "served") < PROMPT
        faults.wait_event("acked", tag="served", timeout=15)
        down.restart()
        with down.client() as client:
            wait_until(
                lambda: client.exists(workers_key(get_config().key_prefix)),
                timeout=15,
                message="the worker never registered",
            )
    finally:
        down.close()
    assert worker.alive()
