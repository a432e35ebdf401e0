"""Which Redis client a queue gets, read from settings at call time."""

import asyncio
import threading

import pytest
import redis
import redis.asyncio.sentinel
import redis.sentinel
from pytest_django.fixtures import Settings
from redis.crc import key_slot

from django_rqueue.engine.connection import (
    close_async_clients,
    get_async_client,
    get_client,
    is_cluster,
    new_async_client,
    redis_errors,
    reset_clients,
    service_of,
)
from django_rqueue.engine.keys import QueueKeys
from django_rqueue.exceptions import RedisUnavailable, SlotMoving
from django_rqueue.health import problems_for
from tests.support.redis_cluster import LocalCluster
from tests.support.redis_sentinel import SERVICE, SentinelSet, sentinel_settings
from tests.support.redis_server import RedisServer
from tests.support.waiting import wait_until


def test_the_client_follows_the_setting_at_call_time(settings: Settings, redis_server: RedisServer):
    first = get_client("default")
    assert first.ping()
    assert get_client("default") is first  # cached per location
    settings.RQUEUE = {**settings.RQUEUE, "REDIS_URL": redis_server.url.replace("/0", "/3")}
    other = get_client("default")
    assert other is not first
    other.set("probe", "1")
    assert redis.Redis.from_url(redis_server.url.replace("/0", "/3")).get("probe") == b"1"


def test_a_queue_with_its_own_redis_url_gets_its_own_client(
    settings: Settings, redis_server: RedisServer
):
    own = redis_server.url.replace("/0", "/5")
    settings.RQUEUE = {**settings.RQUEUE, "QUEUES": {"default": {}, "emails": {"REDIS_URL": own}}}
    get_client("emails").set("where", "emails")
    assert redis.Redis.from_url(own).get("where") == b"emails"
    assert get_client("default").get("where") is None


def test_cache_alias_reuses_the_django_redis_connection(
    settings: Settings, redis_server: RedisServer
):
    from django_redis import get_redis_connection

    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        "jobs": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": redis_server.url},
    }
    settings.RQUEUE = {"CACHE_ALIAS": "jobs", "QUEUES": {"default": {}}}
    reset_clients()  # an earlier test in this process may have cached another "jobs" cache's
    assert get_client("default") is get_redis_connection("jobs")


def test_an_undeclared_queue_is_a_value_error():
    with pytest.raises(ValueError, match="'nope' is not declared"):
        get_client("nope")


def test_service_of_reads_the_service_and_the_masters_options():
    service, options = service_of("rediss://user:p%40ss@MyMaster/3?socket_timeout=2")
    assert service == "MyMaster"  # the case is kept
    assert options == {
        "username": "user",
        "password": "p@ss",
        "db": 3,
        "socket_timeout": 2.0,
        "ssl": True,
    }
    assert service_of("redis://mymaster") == ("mymaster", {})


def test_a_sentinel_url_reaches_the_master_the_sentinels_name(
    settings: Settings, sentinel_set: SentinelSet
):
    settings.RQUEUE = {
        **settings.RQUEUE,
        **sentinel_settings(sentinel_set, 2),
        "QUEUES": {"default": {}, "emails": {"REDIS_URL": sentinel_set.url(4)}},
    }
    client = get_client("default")
    assert isinstance(client.connection_pool, redis.sentinel.SentinelConnectionPool)
    client.set("where", "default")
    get_client("emails").set("where", "emails")
    assert client.info("server")["tcp_port"] == sentinel_set.master.port
    # The health checks (INFO, CONFIG GET, SCRIPT EXISTS) reach the master too: the test
    # servers keep no data on disk, which is the one thing to report.
    assert [p.id for p in problems_for(["default", "emails"])] == ["rqueue.W010"] * 2
    assert sentinel_set.master.client(db=2).get("where") == b"default"
    assert sentinel_set.master.client(db=4).get("where") == b"emails"
    assert get_client("emails") is not client  # a client per URL, one Sentinel object for both


def test_the_asyncio_clients_reach_the_master_too(settings: Settings, sentinel_set: SentinelSet):
    settings.RQUEUE = {**settings.RQUEUE, **sentinel_settings(sentinel_set, 1)}

    async def main() -> object:
        cached = get_async_client("default")
        fresh = new_async_client("default")
        assert cached is not None and fresh is not None
        assert isinstance(fresh.connection_pool, redis.asyncio.sentinel.SentinelConnectionPool)
        try:
            await cached.set("async", "cached")
            return await fresh.get("async")
        finally:
            await fresh.aclose()  # closes its connections to the sentinels as well
            await close_async_clients()

    assert asyncio.run(main()) == b"cached"
    assert sentinel_set.master.client(db=1).get("async") == b"cached"


@pytest.mark.slow
def test_a_cached_client_follows_a_failover(settings: Settings, sentinel_set: SentinelSet):
    settings.RQUEUE = {**settings.RQUEUE, **sentinel_settings(sentinel_set)}
    client = get_client("default")
    client.set("before", "1")
    assert sentinel_set.replica is not None
    wait_until(
        lambda: sentinel_set.replica is not None and sentinel_set.replica.client().get("before")
    )
    old = sentinel_set.master_address()
    sentinel_set.master.kill9()
    with pytest.raises(RedisUnavailable):  # no master until the sentinels promote the replica
        with redis_errors():
            client.set("during", "1")
    new = sentinel_set.wait_failover(old)
    assert new == ("127.0.0.1", sentinel_set.replica.port)
    with redis_errors():
        client.set("after", "1")  # the same cached client, now on the promoted replica
    assert client.get("before") == b"1"
    assert sentinel_set.replica.client().get("after") == b"1"


@pytest.mark.slow
def test_a_demoted_master_unblocks_a_waiting_client_which_then_finds_the_new_master(
    settings: Settings, sentinel_set: SentinelSet
):
    settings.RQUEUE = {**settings.RQUEUE, **sentinel_settings(sentinel_set)}
    client = get_client("default")
    assert client.ping()
    replica = sentinel_set.replica
    assert replica is not None
    old = sentinel_set.master_address()
    outcome: list[BaseException | None] = []

    def wait_for_work() -> None:
        try:
            with redis_errors():
                client.blpop(["rqueue:nothing"], timeout=8)
        except BaseException as exc:
            outcome.append(exc)
        else:
            outcome.append(None)

    blocked = threading.Thread(target=wait_for_work)
    blocked.start()
    wait_until(lambda: sentinel_set.master.client().info("clients")["blocked_clients"] == 1)
    with sentinel_set.sentinels[0].client() as sentinel:
        sentinel.execute_command("SENTINEL", "FAILOVER", SERVICE)  # promote without agreement
    new = sentinel_set.wait_failover(old)
    # The sentinels demote an old master that comes back some seconds later; do it now.
    sentinel_set.master.client().replicaof(*new)
    blocked.join(10)
    assert len(outcome) == 1
    assert isinstance(outcome[0], RedisUnavailable)
    assert "demoted" in str(outcome[0])

    # The connection still points at the old master: its write gets READONLY, which
    # redis-py's Sentinel connection turns into a reconnection to the new master. On a
    # loaded machine a sentinel may still list the old master's flags for a moment, so
    # the write may end in RedisUnavailable once, as callers are told to expect.
    def write() -> bool:
        try:
            with redis_errors(client):
                client.rpush("after", "1")
        except RedisUnavailable:
            return False
        return True

    wait_until(write, timeout=10, message="the write never reached the new master")
    assert replica.client().lrange("after", 0, -1) == [b"1"]


def test_a_cluster_url_gets_a_cluster_client_that_reaches_every_master(
    redis_cluster: LocalCluster,
) -> None:
    client = get_client("default")
    assert is_cluster(client)
    assert get_client() is client  # one client per location, as for a server
    for n in range(30):  # queues' hash tags spread over the three masters
        client.set(f"rqueue:{{q{n}}}:probe", n)
    with redis_cluster.client() as direct:
        owners = {
            redis_cluster.node_of(direct.keyslot(f"rqueue:{{q{n}}}:probe")) for n in range(30)
        }
        assert owners == {0, 1, 2}
        assert direct.get("rqueue:{q7}:probe") == b"7"


def test_the_asyncio_cluster_client_reaches_the_cluster(redis_cluster: LocalCluster) -> None:
    async def main() -> object:
        cached = get_async_client("default")
        assert cached is not None and is_cluster(cached)
        try:
            await cached.set("rqueue:{default}:async", "cached")
            return await cached.get("rqueue:{default}:async")
        finally:
            await close_async_clients()

    assert asyncio.run(main()) == b"cached"


def test_a_script_on_a_half_moved_slot_is_refused_as_redis_unavailable(
    redis_cluster: LocalCluster,
) -> None:
    """A script naming two keys of a slot being moved gets ``TRYAGAIN`` until the move ends;
    the cluster clients give up (``ClusterError: TTL exhausted``), which is transient."""
    keys = QueueKeys.of("rqueue", "default")
    client = get_client("default")
    client.hset(keys.stats, "enqueued", 1)
    slot = key_slot(keys.stats.encode())
    target = (redis_cluster.node_of(slot) + 1) % len(redis_cluster.nodes)

    async def call_async() -> None:
        cached = get_async_client("default")
        assert cached is not None
        try:
            with redis_errors(cached):
                await cached.eval("return 1", 2, keys.base, keys.stats)
        finally:
            await close_async_clients()

    with redis_cluster.half_moved(slot, target):
        with pytest.raises(SlotMoving, match="slot is moving") as caught:
            with redis_errors(client):
                client.eval("return 1", 2, keys.base, keys.stats)
        assert isinstance(caught.value.__cause__, redis.exceptions.ClusterError)
        with pytest.raises(RedisUnavailable, match="slot is moving"):
            asyncio.run(call_async())
    with redis_errors(client):
        assert client.eval("return 1", 2, keys.base, keys.stats) == 1


def test_a_unix_socket_redis_url_serves_sync_and_asyncio_calls(settings: Settings, tmp_path):
    from django_rqueue.job import aget_job, get_job
    from tests.jobs_app.jobs import record

    path = tmp_path / "redis.sock"
    server = RedisServer(["--unixsocket", str(path), "--unixsocketperm", "700"]).start()
    try:
        settings.RQUEUE = {**settings.RQUEUE, "REDIS_URL": f"unix://{path}?db=0"}
        job = record.delay("ledger", "tag")  # enqueue.lua on the dedicated connection
        assert get_job(job.id) is not None  # redis-py's pooled path
        assert server.client().exists(f"rqueue:{{default}}:job:{job.id}") == 1

        async def read() -> object:
            try:
                return await aget_job(job.id)
            finally:
                await close_async_clients()

        assert asyncio.run(read()) is not None
    finally:
        server.close()
