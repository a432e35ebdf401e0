"""The relay, in real pollers: outbox entries written by real terminal scripts of one queue
reach their dependents on another queue, once, whatever dies in between."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest
import redis

from django_rqueue.conf import get_config
from django_rqueue.engine.connection import get_client
from django_rqueue.engine.keys import new_job_id
from django_rqueue.worker.outages import Outages
from django_rqueue.worker.poller import MAX_SLEEP, Poller
from django_rqueue.worker.relay import GROUP, Relay
from tests.support import redis_acl
from tests.support.dependencies import ack, add_nodes, apply, edge, node, outbox
from tests.support.engine import Engine
from tests.support.inprocess import keys, poller_thread, queued_ids
from tests.support.redis_server import RedisServer
from tests.support.waiting import wait_until

SOURCE, TARGET = "emails", "default"


def blocked_clients(client: redis.Redis) -> int:
    """Connections currently blocked in BLPOP (sleeping pollers)."""
    return sum(1 for c in client.client_list() if c.get("cmd") == "blpop")


def lease(settings: Any, seconds: float) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "LEASE": seconds}


@pytest.fixture
def source(rqueue_redis: redis.Redis) -> Engine:
    return Engine(rqueue_redis, keys(SOURCE), SOURCE)


@pytest.fixture
def target(rqueue_redis: redis.Redis) -> Engine:
    return Engine(rqueue_redis, keys(TARGET), TARGET)


def cross_edges(source: Engine, target: Engine, count: int) -> list[tuple[str, str]]:
    """``count`` pairs (a live job of the source queue, a job of the target queue waiting
    for it through the outbox)."""
    pairs = [(new_job_id(SOURCE), new_job_id(TARGET)) for _ in range(count)]
    waiting = [node(target, job_id=d, inputs=[s], shape="L") for s, d in pairs]
    assert add_nodes(target, waiting) == []
    assert add_nodes(source, [node(source, job_id=s, nx=edge(d, 1, "o")) for s, d in pairs]) == []
    return pairs


def state(engine: Engine, job_id: str) -> str | None:
    return engine.job_like(engine.keys.job(job_id)).get("s")


def test_an_end_on_one_queue_releases_its_dependent_on_another_within_one_wake_up(
    settings: Any, rqueue_redis: redis.Redis, source: Engine, target: Engine
) -> None:
    lease(settings, 30.0)  # the poller's own rounds come every MAX_SLEEP seconds
    [(s, d)] = cross_edges(source, target, 1)
    with poller_thread((SOURCE,)):
        wait_until(lambda: blocked_clients(rqueue_redis) >= 1, message="poller not sleeping")
        started = time.monotonic()
        ack(source, s, '"r"')
        assert outbox(source) != [] or state(target, d) == "queued"
        wait_until(
            lambda: state(target, d) == "queued",
            timeout=MAX_SLEEP - 2.5,
            message="the dependent was not released by the poller's wake-up",
        )
        print(f"released {time.monotonic() - started:.3f} s after its input ended")
    assert queued_ids(rqueue_redis) == [d]
    assert outbox(source) == []


@pytest.mark.parametrize("applied_before", [True, False], ids=["applied", "read-only"])
def test_entries_of_a_poller_that_died_before_its_ack_are_taken_over_once(
    settings: Any,
    rqueue_redis: redis.Redis,
    source: Engine,
    target: Engine,
    applied_before: bool,
) -> None:
    lease(settings, 1.0)
    [(s, d)] = cross_edges(source, target, 1)
    ack(source, s, '"r"')
    # A poller reads the entry through the group, maybe applies it, and dies before its ack.
    rqueue_redis.xgroup_create(source.keys.outbox, GROUP, "0")
    got: Any = rqueue_redis.xreadgroup(GROUP, "dead", {source.keys.outbox: ">"}, count=10)
    [(_stream, [(_id, fields)])] = got
    if applied_before:
        apply(target, [(fields[b"d"].decode(), int(fields[b"x"]), fields[b"v"].decode())])
        assert state(target, d) == "queued"
    else:
        assert state(target, d) == "waiting"

    with poller_thread((SOURCE,)) as poller:
        wait_until(
            lambda: rqueue_redis.xlen(source.keys.outbox) == 0,
            timeout=6,
            message="the dead poller's entry was not taken over",
        )
    assert (poller.relay.applied, poller.relay.duplicates) == ((0, 1) if applied_before else (1, 0))
    assert state(target, d) == "queued"
    assert queued_ids(rqueue_redis) == [d]  # released once
    assert rqueue_redis.xpending(source.keys.outbox, GROUP)["pending"] == 0


def test_two_pollers_relay_one_outbox_without_delivering_an_entry_twice(
    rqueue_redis: redis.Redis, source: Engine, target: Engine
) -> None:
    total = 120
    pairs = cross_edges(source, target, total)
    for s, _d in pairs:
        ack(source, s, '"r"')
    assert len(outbox(source)) == total

    pollers = [Poller([SOURCE]), Poller([SOURCE])]
    barrier = threading.Barrier(2)

    def race(poller: Poller) -> None:
        barrier.wait()
        poller.run()

    threads = [threading.Thread(target=race, args=(p,), daemon=True) for p in pollers]
    for poller in pollers:
        poller.relay.count = 7  # many small batches: the two race for them
    for thread in threads:
        thread.start()
    try:
        wait_until(
            lambda: rqueue_redis.xlen(source.keys.outbox) == 0,
            timeout=10,
            message="the outbox was not emptied",
        )
    finally:
        for poller, thread in zip(pollers, threads, strict=True):
            poller.halt(thread)

    assert sum(p.relay.applied for p in pollers) == total
    assert sum(p.relay.duplicates for p in pollers) == 0
    print("applied per poller:", [p.relay.applied for p in pollers])
    assert all(p.relay.applied > 0 for p in pollers), [p.relay.applied for p in pollers]
    assert sorted(queued_ids(rqueue_redis)) == sorted(d for _s, d in pairs)


def test_an_entry_for_an_undeclared_queue_is_logged_and_dropped(
    rqueue_redis: redis.Redis,
    source: Engine,
    target: Engine,
    caplog: pytest.LogCaptureFixture,
) -> None:
    [(s, d)] = cross_edges(source, target, 1)
    rqueue_redis.xadd(source.keys.outbox, {"d": "nowhere:abc", "x": 1, "v": "s1:r"})
    ack(source, s, '"r"')
    relay = Relay("me", Outages())

    with caplog.at_level(logging.ERROR, logger="django_rqueue.relay"):
        got = relay.relay(SOURCE)

    assert (got.read, got.applied, got.dropped, got.left) == (2, 1, 1, 0)
    assert "nowhere:abc" in caplog.text and "not declared" in caplog.text
    assert state(target, d) == "queued"
    assert rqueue_redis.xlen(source.keys.outbox) == 0
    assert relay.relay(SOURCE).read == 0


def test_the_take_over_walks_the_pending_entries_from_where_it_stopped(
    rqueue_redis: redis.Redis, source: Engine, target: Engine
) -> None:
    pairs = cross_edges(source, target, 32)
    for s, _d in pairs:
        ack(source, s, '"r"')
    key = source.keys.outbox
    rqueue_redis.xgroup_create(key, GROUP, "0")
    rqueue_redis.xreadgroup(GROUP, "dead", {key: ">"}, count=100)
    lease_ms = int(get_config().lease * 1000)

    def oldest_idle_ms() -> int:
        return min(
            int(p["time_since_delivered"])
            for p in rqueue_redis.xpending_range(key, GROUP, "-", "+", 100)
        )

    wait_until(lambda: oldest_idle_ms() > lease_ms, timeout=lease_ms / 1000 + 2)
    # The first 30 are taken over by a live poller (idle again); the last 2 are still lost.
    entries: list[tuple[bytes, Any]] = rqueue_redis.xrange(key, count=30)  # type: ignore[assignment]
    heads: list[Any] = [entry_id for entry_id, _fields in entries]
    rqueue_redis.xclaim(key, GROUP, "busy", 0, heads)
    relay = Relay("me", Outages(), count=2)  # XAUTOCLAIM looks at 20 pending entries a call

    calls = 0
    while relay.applied < 2 and calls < 5:
        relay.relay(SOURCE)
        calls += 1

    assert relay.applied == 2, calls
    assert calls == 2  # the first call looked at 20 live ones; the second went on from there
    assert [state(target, d) for _s, d in pairs[-2:]] == ["queued", "queued"]
    assert rqueue_redis.xpending(key, GROUP)["pending"] == 30


def test_entries_for_a_redis_that_is_down_stay_pending_and_are_applied_once_it_is_back(
    rqueue_redis: redis.Redis, other_redis_server: RedisServer
) -> None:
    # The dependent's queue ("emails") is on the other server; the outbox on the first.
    here, there = "default", "emails"
    source = Engine(rqueue_redis, keys(here), here)
    target = Engine(other_redis_server.client(), keys(there), there)
    s, d = new_job_id(here), new_job_id(there)
    waiting = node(target, job_id=d, inputs=[s], shape="L")
    assert add_nodes(target, [waiting]) == []
    assert add_nodes(source, [node(source, job_id=s, nx=edge(d, 1, "o"))]) == []
    ack(source, s, '"r"')
    other_redis_server.stop()
    relay = Relay("me", Outages())

    got = relay.relay(here)

    assert (got.read, got.applied, got.left) == (1, 0, 1)
    assert rqueue_redis.xlen(source.keys.outbox) == 1
    assert rqueue_redis.xpending(source.keys.outbox, GROUP)["pending"] == 1
    assert relay.relay(here).left == 1  # its retry time has not come: not even tried
    # Meanwhile an entry for a queue whose Redis is up does not wait behind it.
    healthy = Engine(rqueue_redis, keys("low"), "low")
    s2, d2 = new_job_id(here), new_job_id("low")
    assert add_nodes(healthy, [node(healthy, job_id=d2, inputs=[s2], shape="L")]) == []
    assert add_nodes(source, [node(source, job_id=s2, nx=edge(d2, 1, "o"))]) == []
    ack(source, s2, '"r"')
    got = relay.relay(here)
    assert (got.read, got.applied, got.left) == (2, 1, 1)
    assert state(healthy, d2) == "queued"

    other_redis_server.restart()  # empty (SHUTDOWN NOSAVE): the dependent is written again
    target = Engine(other_redis_server.client(), keys(there), there)
    if redis_acl.enabled():
        redis_acl.create_user(target.client)
    assert add_nodes(target, [waiting]) == []
    wait_until(lambda: relay.relay(here).applied == 1, timeout=10, message="not applied")
    assert state(target, d) == "queued"
    assert rqueue_redis.xlen(source.keys.outbox) == 0
    assert rqueue_redis.xpending(source.keys.outbox, GROUP)["pending"] == 0


def test_the_relay_works_across_the_slots_of_a_redis_cluster(redis_cluster: Any) -> None:
    client = get_client()
    source = Engine(client, keys(SOURCE), SOURCE)
    target = Engine(client, keys(TARGET), TARGET)
    pairs = cross_edges(source, target, 3)
    for s, _d in pairs:
        ack(source, s, '"r"')
    relay = Relay("me", Outages())

    got = relay.relay(SOURCE)

    assert (got.read, got.applied, got.left) == (3, 3, 0)
    assert [state(target, d) for _s, d in pairs] == ["queued"] * 3
    assert client.xlen(source.keys.outbox) == 0
