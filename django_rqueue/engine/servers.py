"""Which Redis servers a client talks to: a cluster or one server, their names for messages."""

from __future__ import annotations

from typing import Any, cast

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster


def is_cluster(client: redis.Redis | redis.asyncio.Redis) -> bool:
    """Whether ``client`` is a Redis Cluster client (``REDIS_CLUSTER``)."""
    kinds = (redis.cluster.RedisCluster, redis.asyncio.cluster.RedisCluster)
    return isinstance(client, kinds)


def as_cluster(client: object) -> redis.cluster.RedisCluster | None:
    """``client`` (typed as a ``redis.Redis``) as the Redis Cluster client it is
    (``REDIS_CLUSTER``), else ``None``: the typed :func:`is_cluster`, for the calls only a
    cluster client has (its nodes, a slot's master)."""
    return client if isinstance(client, redis.cluster.RedisCluster) else None


def servers(client: redis.Redis) -> list[tuple[str, redis.Redis]]:
    """The servers behind ``client``, each as ``(name, a client of that server alone)``:
    ``client`` itself named ``""``, or, for a cluster client, each master named
    ``"host:port"`` (as the cluster client knows them now), for per-server commands
    (``INFO``, ``CONFIG GET``, ``SCRIPT EXISTS``) that a cluster client would send to one
    node picked at random."""
    cluster = as_cluster(client)
    if cluster is None:
        return [("", client)]
    masters = cluster.get_primaries()  # type: ignore[no-untyped-call]
    return [(node.name, cluster.get_redis_connection(node)) for node in masters]


def server_name(client: redis.Redis | redis.asyncio.Redis) -> str:
    """The server behind ``client`` as a URL without its password, for messages.

    ``redis://[user@]host:port/db`` (``rediss://`` with TLS), ``unix://path?db=N``,
    ``redis://<service>/<db>`` for the master of a Sentinel service, or
    ``redis://host:port`` of the node a Redis Cluster client started from.
    """
    if is_cluster(client):
        node: Any = cast(Any, client).get_default_node()
        return f"redis://{node.host}:{node.port}" if node is not None else "Redis Cluster"
    pool: Any = client.connection_pool
    options: dict[str, Any] = pool.connection_kwargs
    db = options.get("db", 0)
    service = getattr(pool, "service_name", None)
    if service is not None:
        return f"redis://{service}/{db}"
    if options.get("path"):
        return f"unix://{options['path']}?db={db}"
    user = options.get("username")
    scheme = "rediss" if "SSL" in getattr(pool, "connection_class", type).__name__ else "redis"
    where = f"{user}@" if user else ""
    return f"{scheme}://{where}{options.get('host', 'localhost')}:{options.get('port', 6379)}/{db}"
