"""The heartbeat's writer side: a master publishes itself, removes itself, and asks for restarts.

A supervisor publishes a hash (:func:`publish`) every heartbeat and renews its
TTL; the hash expires one lease after the worker's last heartbeat, so a dead
worker disappears from :func:`~django_rqueue.worker.heartbeat.list_workers`
within one lease without anyone cleaning up after it. :func:`request_restart`
(``rqueue_restart``) is read back by every master at its next :func:`publish`.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, cast

from ..conf import get_config
from ..engine.connection import get_client, redis_errors, redis_time_ms
from ..engine.keys import restart_key, worker_key, workers_key
from ..worker.heartbeat import WorkerInfo


def publish(info: WorkerInfo, ttl: float) -> int:
    """Publish ``info`` (its ``heartbeat`` set to Redis time now) for ``ttl`` seconds.

    Also reads the restart request in the same round trip: returns the Redis
    time (ms) of the last ``rqueue_restart``, or 0 when none was made. Values
    are stored as strings (numbers, lists and booleans as JSON).

    Raises:
        RedisUnavailable: Redis cannot be reached.
    """
    prefix = get_config().key_prefix
    client = get_client()
    key = worker_key(prefix, info.id)
    now = redis_time_ms(client)
    published = dataclasses.replace(info, heartbeat=now).as_dict()
    del published["id"]  # the key names the worker
    del published["problems"]  # a reader's finding
    mapping = {
        name: value if isinstance(value, str) else json.dumps(value)
        for name, value in published.items()
    }
    with redis_errors(client):
        pipe = client.pipeline(transaction=False)  # no MULTI/EXEC: fewer commands per beat
        pipe.hset(key, mapping=cast(Any, mapping))  # redis-py's Mapping key type is invariant
        pipe.pexpire(key, int(ttl * 1000))
        pipe.zadd(workers_key(prefix), {info.id: now})
        pipe.get(restart_key(prefix))
        *written, restart = pipe.execute(raise_on_error=False)
        for reply in written:
            if isinstance(reply, Exception):
                raise reply
    try:  # a corrupt request (not a number, not a string) is no request
        return int(restart or 0) if not isinstance(restart, Exception) else 0
    except ValueError:
        return 0


def remove(worker_id: str) -> None:
    """Forget ``worker_id`` (on a clean exit).

    Its hash goes first, then its registry entry, in one pipeline without
    ``MULTI``: the two keys may live in different slots of a Redis Cluster, and
    an entry left without its hash (a crash in between) is dropped by the next
    :func:`list_workers`.
    """
    prefix = get_config().key_prefix
    client = get_client()
    with redis_errors(client):
        pipe = client.pipeline(transaction=False)
        pipe.delete(worker_key(prefix, worker_id))
        pipe.zrem(workers_key(prefix), worker_id)
        pipe.execute()


def request_restart() -> int:
    """Ask every worker to finish its jobs and re-exec itself; return the request time (ms)."""
    prefix = get_config().key_prefix
    client = get_client()
    now = redis_time_ms(client)
    with redis_errors(client):
        client.set(restart_key(prefix), now, ex=7 * 86400)
    return now
