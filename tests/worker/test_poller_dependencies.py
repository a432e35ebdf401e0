"""The poller and jobs that wait for others: it ends a waiting job at its dependency
deadline (its sleep ends then), and the end reaches the job's dependents on the inline
path and, through the relay, on the outbox path; and it forgets the workflows whose record
is gone, a step of each queue's list at a time."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
import redis

from django_rqueue import JobStatus, get_job
from django_rqueue.dependencies import EdgePath
from django_rqueue.engine.fields import JobFields, StatsFields
from django_rqueue.engine.keys import new_job_id
from django_rqueue.worker.poller import MAX_SLEEP, Poller
from tests.jobs_app.jobs import record
from tests.support.dependencies import add_nodes, edge, node
from tests.support.engine import Engine
from tests.support.inprocess import keys, poller_thread
from tests.support.waiting import wait_until

SOURCE = "emails"
DEADLINE_MS = 1500


@pytest.fixture(params=["i", "o"], ids=["inline", "outbox"])
def path(request: pytest.FixtureRequest) -> EdgePath:
    """Inline: the dependent is on the timed-out job's queue; outbox: on another queue."""
    value: EdgePath = request.param
    return value


def test_the_poller_ends_a_job_at_its_dependency_deadline_and_its_dependent_hears_of_it(
    settings: Any, rqueue_redis: redis.Redis, path: EdgePath
) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "LEASE": 30.0}  # the poller's rounds: MAX_SLEEP apart
    source = Engine(rqueue_redis, keys(SOURCE), SOURCE)
    target_queue = SOURCE if path == "i" else "default"
    target = Engine(rqueue_redis, keys(target_queue), target_queue)
    a, d, x = new_job_id(SOURCE), new_job_id(target_queue), new_job_id(SOURCE)
    assert add_nodes(target, [node(target, job_id=d, inputs=[a])]) == []  # policy "cancel"
    late = node(source, job_id=a, inputs=[x], nx=edge(d, 1, path))
    created = time.monotonic()
    assert add_nodes(source, [late], deadline_ms=DEADLINE_MS) == []

    with poller_thread((SOURCE,)):
        wait_until(
            lambda: target.job(d).get(JobFields.STATE) == "cancelled",
            timeout=DEADLINE_MS / 1000 + MAX_SLEEP / 2,
            message="the job past its deadline was not swept in time, or its dependent not told",
        )
        ended = time.monotonic() - created
    print(f"swept and told {ended:.3f} s after creation (deadline {DEADLINE_MS} ms)")
    assert ended >= DEADLINE_MS / 1000 - 0.05
    assert source.job(a)[JobFields.CANCEL_REASON] == "dependency_timeout"
    assert target.job(d)[JobFields.CANCEL_REASON] == "dependency_failed"
    assert source.stats()[StatsFields.DEPENDENCY_TIMEOUT] == 1
    assert rqueue_redis.xlen(source.keys.outbox) == 0


def workflows(client: redis.Redis, queue: str, count: int, *, gone: set[int]) -> list[str]:
    """``count`` workflow ids in ``queue``'s ``wfs`` (oldest first), with a record except
    those whose position is in ``gone``."""
    k = keys(queue)
    ids = [new_job_id(queue) for _ in range(count)]
    pipe = client.pipeline(transaction=False)
    for n, workflow_id in enumerate(ids):
        pipe.zadd(k.workflows, {workflow_id: 1_000 + n})
        if n not in gone:
            pipe.hset(k.workflow(workflow_id), "st", "running")
    pipe.execute()
    return ids


def members(client: redis.Redis, queue: str = "default") -> set[str]:
    return {m.decode() for m in client.zrange(keys(queue).workflows, 0, -1)}  # type: ignore[union-attr]


def test_a_poller_round_forgets_the_workflows_whose_record_is_gone(
    rqueue_redis: redis.Redis,
) -> None:
    ids = workflows(rqueue_redis, "default", 6, gone={0, 3, 5})

    with poller_thread(("default",)):
        wait_until(lambda: members(rqueue_redis) == {ids[1], ids[2], ids[4]}, timeout=3)


def test_the_walk_over_the_workflows_goes_on_where_it_stopped(rqueue_redis: redis.Redis) -> None:
    # 450 workflows (TRIM_LIMIT: 200 a call); those gone sit past the first call's members.
    gone = {300, 449}
    ids = workflows(rqueue_redis, "default", 450, gone=gone)
    live = {w for n, w in enumerate(ids) if n not in gone}
    poller = Poller(["default"])

    assert poller.forget_workflows() is False  # members 0..199: none gone, the next minute
    assert members(rqueue_redis) == live | {ids[300], ids[449]}
    assert poller.forget_workflows() is True  # 200..399: one gone, a backlog: at once
    assert members(rqueue_redis) == live | {ids[449]}
    assert poller.forget_workflows() is False  # the end: back to the oldest next time
    assert members(rqueue_redis) == live
    assert poller.forget_workflows() is False
    assert members(rqueue_redis) == live


def test_a_corrupt_outbox_or_waiting_key_does_not_stop_promotion(
    rqueue_redis: redis.Redis, ledger: str, caplog: pytest.LogCaptureFixture
) -> None:
    jobs = [record.using(delay=0.001).delay(ledger, str(n)) for n in range(3)]
    k = keys()
    rqueue_redis.set(k.outbox, "not a stream")
    rqueue_redis.set(k.waiting, "not a zset")
    wait_until(lambda: rqueue_redis.zcount(k.delayed, 0, time.time() * 1000) == 3)
    poller = Poller(["default"], batch=2)

    with caplog.at_level(logging.ERROR, logger="django_rqueue.poller"):
        first = poller.run_once()
        poller.run_once()

    assert caplog.records == []
    assert first == 0  # the batch was full: promote's whole reply came back
    assert all(get_job(j.id).status is JobStatus.QUEUED for j in jobs)  # type: ignore[union-attr]
