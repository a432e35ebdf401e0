"""A real poller process killed between applying an outbox entry and acknowledging it: another
poller takes the entry over (``XAUTOCLAIM``) and the dependent is released once.

No hook in the package: the poller (``rqueue_poller``, a subprocess) reaches Redis through a
fault proxy (:class:`tests.faults.proxy.FaultProxy`) armed to cut its connection right
after the request that carries the entry's value (only ``dep_apply.lua``'s arguments carry
it) has reached Redis. Redis applies it, the poller waits for a reply that never comes,
and the test SIGKILLs it: the entry is applied and still pending in the consumer group, never
acknowledged. A second poller process, straight on Redis, claims it once it has been idle
for a lease, finds it applied (a duplicate), acknowledges and deletes it.
"""

from __future__ import annotations

import signal
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from django_rqueue.engine.fields import JobFields, StatsFields
from django_rqueue.engine.keys import new_job_id
from django_rqueue.worker.relay import GROUP
from tests.faults.proxy import FaultProxy
from tests.support import redis_acl
from tests.support.dependencies import ack, add_nodes, apply, arrivals, edge, node, outbox
from tests.support.engine import Engine
from tests.support.inprocess import keys
from tests.support.processes import Processes, command_env
from tests.support.redis_server import RedisServer
from tests.support.waiting import wait_until

SOURCE, TARGET = "emails", "default"
#: Seconds: the pollers' lease, after which an entry left pending is taken over.
LEASE = 1.0


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    started = Processes(tmp_path / "procs")
    try:
        yield started
    finally:
        started.kill_all()
        print(started.reports())


def pending(client: redis.Redis, stream: str) -> int:
    info: Any = client.xpending(stream, GROUP)
    return int(info["pending"])


def url_for(port_url: str) -> str:
    return redis_acl.as_acl_user(port_url) if redis_acl.enabled() else port_url


def test_a_poller_killed_between_apply_and_ack_leaves_its_entry_to_another_once(
    redis_server: RedisServer, rqueue_redis: redis.Redis, processes: Processes
) -> None:
    source = Engine(rqueue_redis, keys(SOURCE), SOURCE)
    target = Engine(rqueue_redis, keys(TARGET), TARGET)
    s, d = new_job_id(SOURCE), new_job_id(TARGET)
    assert add_nodes(target, [node(target, job_id=d, inputs=[s], shape="L")]) == []
    assert add_nodes(source, [node(source, job_id=s, nx=edge(d, 1, "o"))]) == []
    marker = f"relayed-{uuid.uuid4().hex}"
    # dep_apply.lua known to Redis: the poller's EVALSHA of it (cut off) is then applied.
    assert apply(target, [(new_job_id(TARGET), 1, "s1:null")]).duplicates == 1
    env = {"RQUEUE_TEST_LEASE": str(LEASE)}

    with FaultProxy(redis_server.port) as proxy:
        proxy.cut_after(marker.encode())
        first = processes.start(
            "rqueue_poller",
            "--queues",
            SOURCE,
            env=command_env(redis_url=url_for(proxy.url()), extra=env),
        )
        wait_until(
            lambda: any(c.get("cmd") == "blpop" for c in rqueue_redis.client_list()),
            timeout=20,
            message="the first poller did not start",
        )
        token = ack(source, s, f'"{marker}"')  # its entry wakes the poller up
        wait_until(lambda: proxy.cut() == 1, message="dep_apply never went through the proxy")
        wait_until(lambda: target.state(d) == "queued", message="dep_apply was not applied")
        # Applied, never acknowledged: the poller waits for a reply that never comes.
        assert pending(rqueue_redis, source.keys.outbox) == 1
        first.signal(signal.SIGKILL)
        first.wait(10)
    assert pending(rqueue_redis, source.keys.outbox) == 1
    assert len(outbox(source)) == 1
    assert target.stats()[StatsFields.RELEASED] == 1

    processes.start(
        "rqueue_poller",
        "--queues",
        SOURCE,
        env=command_env(redis_url=url_for(redis_server.url), extra=env),
    )
    wait_until(
        lambda: rqueue_redis.xlen(source.keys.outbox) == 0,
        timeout=15,
        message="the second poller did not take the entry over",
    )
    assert pending(rqueue_redis, source.keys.outbox) == 0
    assert target.state(d) == "queued"
    assert target.stats()[StatsFields.RELEASED] == 1  # released once
    assert target.lrange(target.keys.group(0, "")) == [d]
    assert target.job(d)[JobFields.INPUTS_MISSING] == "0"
    assert [a.token for a in arrivals(target, d).values()] == [token]
