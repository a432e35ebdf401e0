"""The worker registry: what each running worker publishes about itself.

A supervisor publishes a hash (see :func:`publish`) every heartbeat and
renews its TTL; the hash expires one lease after the worker's last
heartbeat, so a dead worker disappears from :func:`list_workers` within one
lease without anyone cleaning up after it.
"""

from __future__ import annotations

import json
from typing import Any, cast

from ..conf import get_config
from ..engine.connection import as_text, get_client, redis_errors, redis_time_ms
from ..engine.keys import restart_key, worker_key, workers_key


def publish(worker_id: str, info: dict[str, Any], ttl: float) -> int:
    """Publish ``info`` for ``worker_id`` with a TTL of ``ttl`` seconds.

    Also reads the restart request in the same round trip: returns the Redis
    time (ms) of the last ``rqueue_restart``, or 0 when none was made.

    ``info`` values are stored as strings (lists and dicts as JSON). The
    ``heartbeat`` field is set to Redis time (ms).

    Raises:
        RedisUnavailable: Redis cannot be reached.
    """
    prefix = get_config().key_prefix
    client = get_client()
    key = worker_key(prefix, worker_id)
    now = redis_time_ms(client)
    mapping = {
        name: value if isinstance(value, str) else json.dumps(value)
        for name, value in {**info, "heartbeat": now}.items()
    }
    with redis_errors():
        pipe = client.pipeline(transaction=False)  # no MULTI/EXEC: fewer commands per beat
        pipe.hset(key, mapping=cast(Any, mapping))  # redis-py's Mapping key type is invariant
        pipe.pexpire(key, int(ttl * 1000))
        pipe.zadd(workers_key(prefix), {worker_id: now})
        pipe.get(restart_key(prefix))
        restart = pipe.execute()[-1]
    return int(restart or 0)


def remove(worker_id: str) -> None:
    """Forget ``worker_id`` (on a clean exit)."""
    prefix = get_config().key_prefix
    with redis_errors():
        pipe = get_client().pipeline(transaction=True)
        pipe.delete(worker_key(prefix, worker_id))
        pipe.zrem(workers_key(prefix), worker_id)
        pipe.execute()


def list_workers() -> list[dict[str, Any]]:
    """Return the live workers' published info, oldest first.

    Each dict has ``id``, ``host``, ``pid``, ``queues`` (list), ``concurrency``,
    ``jobs`` (list of ``{"id", "queue", "started_at"}``), ``processed``,
    ``failed``, ``started_at`` and ``heartbeat`` (Redis time, ms). Workers whose
    hash expired are dropped from the registry as a side effect.
    """
    prefix = get_config().key_prefix
    client = get_client()
    with redis_errors():
        members: list[bytes] = client.zrange(workers_key(prefix), 0, -1)  # type: ignore[assignment]
        ids = [as_text(i) for i in members]
        pipe = client.pipeline(transaction=False)
        for worker_id in ids:
            pipe.hgetall(worker_key(prefix, worker_id))
        hashes = pipe.execute()
    found, gone = [], []
    for worker_id, fields in zip(ids, hashes, strict=True):
        if not fields:
            gone.append(worker_id)
            continue
        info: dict[str, Any] = {"id": worker_id}
        for name, value in fields.items():
            text = value.decode() if isinstance(value, bytes) else str(value)
            field = name.decode() if isinstance(name, bytes) else str(name)
            try:
                info[field] = json.loads(text)
            except ValueError:
                info[field] = text
        found.append(info)
    if gone:
        with redis_errors():
            client.zrem(workers_key(prefix), *gone)
    return found


def request_restart() -> int:
    """Ask every worker to finish its jobs and re-exec itself; return the request time (ms)."""
    prefix = get_config().key_prefix
    client = get_client()
    now = redis_time_ms(client)
    with redis_errors():
        client.set(restart_key(prefix), now, ex=7 * 86400)
    return now
