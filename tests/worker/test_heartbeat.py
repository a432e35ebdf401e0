"""The worker registry (django_rqueue.master.heartbeat writes it, django_rqueue.worker.heartbeat
reads it) on a real redis-server."""

from __future__ import annotations

import dataclasses

import redis
from redis.crc import key_slot

from django_rqueue.engine.connection import redis_time_ms
from django_rqueue.engine.keys import restart_key, worker_key, workers_key
from django_rqueue.master.heartbeat import publish, remove, request_restart
from django_rqueue.worker.heartbeat import WorkerInfo, WorkerJob, list_workers
from tests.support.redis_cluster import LocalCluster
from tests.support.waiting import wait_until

PREFIX = "rqueue"


def busy_worker(worker_id: str = "host-a:100:abc") -> WorkerInfo:
    return WorkerInfo(
        id=worker_id,
        host="host-a",
        pid=100,
        queues=("default", "emails"),
        concurrency=2,
        jobs=(WorkerJob("default:AAA", "default", 101), WorkerJob("emails:BBB", "emails", 102)),
        processed=7,
        failed=1,
        started_at=1_700_000_000_000,
        poller=False,
    )


def test_what_a_worker_publishes_is_what_list_workers_reads(rqueue_redis: redis.Redis) -> None:
    info = busy_worker()
    before = redis_time_ms(rqueue_redis)

    assert publish(info, ttl=30) == 0  # no restart requested

    [found] = list_workers()
    assert found == dataclasses.replace(info, heartbeat=found.heartbeat)
    assert before <= found.heartbeat <= redis_time_ms(rqueue_redis)
    assert 0 < rqueue_redis.pttl(worker_key(PREFIX, info.id)) <= 30_000
    assert rqueue_redis.zscore(workers_key(PREFIX), info.id) == found.heartbeat


def test_workers_are_listed_oldest_heartbeat_first(rqueue_redis: redis.Redis) -> None:
    publish(WorkerInfo(id="w:1:a"), ttl=30)
    publish(WorkerInfo(id="w:2:b"), ttl=30)
    wait_until(lambda: redis_time_ms(rqueue_redis) > list_workers()[-1].heartbeat)
    publish(WorkerInfo(id="w:1:a"), ttl=30)  # a newer heartbeat

    assert [w.id for w in list_workers()] == ["w:2:b", "w:1:a"]


def test_a_worker_whose_hash_expired_is_dropped_from_the_registry(
    rqueue_redis: redis.Redis,
) -> None:
    publish(WorkerInfo(id="w:1:live"), ttl=30)
    publish(WorkerInfo(id="w:2:dead"), ttl=0.05)  # its last heartbeat, 50 ms to live
    wait_until(
        lambda: not rqueue_redis.exists(worker_key(PREFIX, "w:2:dead")),
        message="the hash did not expire",
    )
    assert rqueue_redis.zcard(workers_key(PREFIX)) == 2  # nobody cleaned up yet

    assert [w.id for w in list_workers()] == ["w:1:live"]

    assert rqueue_redis.zrange(workers_key(PREFIX), 0, -1) == [b"w:1:live"]


def test_remove_forgets_a_worker_at_once(rqueue_redis: redis.Redis) -> None:
    publish(busy_worker(), ttl=30)

    remove("host-a:100:abc")

    assert list_workers() == []
    assert not rqueue_redis.exists(worker_key(PREFIX, "host-a:100:abc"))
    assert rqueue_redis.zcard(workers_key(PREFIX)) == 0


def test_a_restart_request_reaches_every_worker_at_its_next_heartbeat(
    rqueue_redis: redis.Redis,
) -> None:
    before = redis_time_ms(rqueue_redis)

    requested = request_restart()

    assert before <= requested <= redis_time_ms(rqueue_redis)
    assert rqueue_redis.get(restart_key(PREFIX)) == str(requested).encode()
    assert 6 * 86400 < rqueue_redis.ttl(restart_key(PREFIX)) <= 7 * 86400
    assert publish(WorkerInfo(id="w:1:a"), ttl=30) == requested
    assert publish(WorkerInfo(id="w:2:b"), ttl=30) == requested


def test_fields_of_the_wrong_type_read_as_their_defaults(rqueue_redis: redis.Redis) -> None:
    rqueue_redis.hset(
        worker_key(PREFIX, "w:1:odd"),
        mapping={
            "host": "h",
            "pid": "not a number",
            "queues": '"default"',  # a string, not a list
            "concurrency": "true",  # a boolean, not a number
            "jobs": '[{"id": "default:C", "queue": "default"}, "junk"]',
            "poller": "false",
        },
    )
    rqueue_redis.zadd(workers_key(PREFIX), {"w:1:odd": 1})

    [found] = list_workers()

    assert found == WorkerInfo(
        id="w:1:odd",
        host="h",
        pid=0,
        queues=(),
        concurrency=0,
        jobs=(WorkerJob("default:C", "default", 0),),
        poller=False,
        problems=(  # what a reader warns about
            "a job is not an object: 'junk'",
            "queues is not a list: 'default'",
            "pid is not an integer: 'not a number'",
            "concurrency is not an integer: 'True'",
        ),
    )


def test_the_registry_works_on_a_cluster_with_its_keys_on_different_masters(
    redis_cluster: LocalCluster,
) -> None:
    def node(key: str) -> int:
        return redis_cluster.node_of(key_slot(key.encode()))

    registry = node(workers_key(PREFIX))
    ids = (f"w:{n}:a" for n in range(100))
    worker_id = next(i for i in ids if node(worker_key(PREFIX, i)) != registry)
    requested = request_restart()
    assert publish(busy_worker(worker_id), ttl=30) == requested
    assert [w.id for w in list_workers()] == [worker_id]

    remove(worker_id)  # no CROSSSLOT: the two keys are not in one MULTI

    assert list_workers() == []
    with redis_cluster.client() as client:
        assert not client.exists(worker_key(PREFIX, worker_id))
