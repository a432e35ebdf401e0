"""Redis connections, per queue, built from the ``RQUEUE`` setting at call time.

Clients are cached per location (URL or cache alias) and process: redis-py's
connection pool notices a fork and opens fresh sockets in the child.

With ``RQUEUE["SENTINELS"]`` a ``REDIS_URL`` names a master monitored by
those Redis Sentinels (``redis://[user:password@]<service>/<db>``, as
django-redis reads it) and the client is redis-py's ``Sentinel.master_for``
(``redis.asyncio.sentinel`` for asyncio clients): each new connection asks
the sentinels where the master is, a connection to a master that was demoted
turns its ``READONLY`` reply into a ``ConnectionError`` and reconnects, so
every caller follows a failover through the usual retry and
:class:`RedisUnavailable` handling. The URL's user, password, db and query
options apply to the master; ``RQUEUE["SENTINEL_KWARGS"]`` to the sentinels.

With ``RQUEUE["REDIS_CLUSTER"]`` a ``REDIS_URL`` names any node of a Redis
Cluster and the client is redis-py's ``redis.cluster.RedisCluster``
(``redis.asyncio.cluster.RedisCluster`` for asyncio clients): it learns the
slot map from that node, sends each command to the master of its keys' slot
and follows ``MOVED`` and ``ASK`` replies while a slot moves. It offers the
commands of ``redis.Redis`` and is typed as one here (so are the asyncio
ones); code that needs a node itself (a raw connection, per-node health)
asks :func:`is_cluster` first. Every script of django-rqueue touches one
slot, the queue's hash tag (:mod:`~django_rqueue.engine.keys`).

Timeouts are short and finite so that an unreachable Redis surfaces within
about 2 s instead of hanging a request or a worker: connect timeout 0.5 s,
two retries with exponential backoff (50 ms base, 250 ms cap), socket
timeout 10 s (longer than any blocking call django-rqueue makes), TCP
keepalive on, and a health check of idle connections every 15 s.

Beside it, and re-exported here: :mod:`~django_rqueue.engine.errors` (what a
redis-py error amounts to, :func:`redis_errors`), :mod:`~django_rqueue.engine.servers`
(the servers behind a client) and :mod:`~django_rqueue.engine.values` (reply values).
"""

from __future__ import annotations

import asyncio
import enum
import weakref
from typing import Any, NamedTuple, cast
from urllib.parse import unquote, urlsplit

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.sentinel
import redis.cluster
import redis.sentinel
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.connection import parse_url
from redis.exceptions import RedisClusterException
from redis.retry import Retry

from ..conf import Config, get_config, without_password
from ..exceptions import RedisUnavailable

# Re-exported: the error classification, the servers behind a client and the reply values
# have their own modules; callers import them from here as well.
from .errors import CERTIFICATE_HINT as CERTIFICATE_HINT
from .errors import CLUSTER_IN_FLUX as CLUSTER_IN_FLUX
from .errors import DEMOTED as DEMOTED
from .errors import SLOT_IN_FLUX as SLOT_IN_FLUX
from .errors import certificate_refused as certificate_refused
from .errors import redis_errors as redis_errors
from .errors import unavailable as unavailable
from .errors import wrong_type as wrong_type
from .servers import as_cluster as as_cluster
from .servers import is_cluster as is_cluster
from .servers import server_name as server_name
from .servers import servers as servers
from .values import as_text as as_text
from .values import ms_to_datetime as ms_to_datetime
from .values import redis_time_ms as redis_time_ms

#: Seconds to wait for a TCP connect before retrying.
CONNECT_TIMEOUT = 0.5
#: Seconds to wait for any reply; blocking calls use shorter server-side timeouts.
SOCKET_TIMEOUT = 10.0
#: Shortest timeout in seconds of a blocking call (``BLPOP``): Redis reads one that rounds
#: to 0 ms as "block for ever".
MIN_BLOCK = 0.001
#: Retries after a failed connect or a dropped connection.
RETRIES = 2
#: Seconds a sentinel gets to answer (then the next sentinel is asked, without retry).
SENTINEL_TIMEOUT = 1.0


class LocationKind(enum.StrEnum):
    """How a queue's Redis is configured."""

    #: ``REDIS_URL`` (global or the queue's own).
    URL = "url"
    #: ``CACHE_ALIAS``: the connection of a django-redis cache.
    CACHE = "cache"
    #: ``REDIS_URL`` naming a master of ``SENTINELS``.
    SENTINEL = "sentinel"
    #: ``REDIS_URL`` naming a node of a Redis Cluster (``REDIS_CLUSTER``).
    CLUSTER = "cluster"


class Location(NamedTuple):
    """Where a queue's Redis is: the key clients are cached under."""

    kind: LocationKind
    #: The URL (:attr:`LocationKind.URL`, :attr:`LocationKind.SENTINEL`,
    #: :attr:`LocationKind.CLUSTER`) or the cache alias
    #: (:attr:`LocationKind.CACHE`).
    where: str
    #: With :attr:`LocationKind.SENTINEL`: the ``(host, port)`` of every sentinel.
    sentinels: tuple[tuple[str, int], ...] = ()
    #: With :attr:`LocationKind.SENTINEL`: ``SENTINEL_KWARGS`` as text (a part of the key).
    sentinel_options: str = ""

    @property
    def display(self) -> str:
        """This location for messages: the URL without its password (``redis://user@host:6379/0``)
        or ``the Redis of cache '<alias>'``."""
        if self.kind is LocationKind.CACHE:
            return f"the Redis of cache {self.where!r}"
        return without_password(self.where)


_clients: dict[Location, redis.Redis] = {}
#: The client of each queue name (``None``: the global one), with the parsed ``RQUEUE`` it
#: was resolved from: a new setting resolves again (finding a queue's location costs a
#: ``.delay()`` more than the rest of ``get_client``, in the bench).
_by_queue: dict[str | None, tuple[Config, redis.Redis]] = {}
#: redis-py ``Sentinel`` objects (the connections to the sentinels), per sentinel set.
_sentinels: dict[tuple[tuple[tuple[str, int], ...], str], redis.sentinel.Sentinel] = {}
#: asyncio clients per event loop (a client belongs to the loop it runs on), then per location.
_async_clients: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[Location, redis.asyncio.Redis]
] = weakref.WeakKeyDictionary()


def client_options(url: str = "") -> dict[str, Any]:
    """Keyword arguments of django-rqueue's connections to Redis (``redis.Redis.from_url``, or
    ``Sentinel.master_for`` for the master of a service).

    ``url``: the URL they connect to; a ``unix://`` socket gets no TCP keepalive (redis-py's
    Unix socket connections refuse the option: every command would raise ``TypeError``).
    """
    options: dict[str, Any] = {
        "socket_connect_timeout": CONNECT_TIMEOUT,
        "socket_timeout": SOCKET_TIMEOUT,
        "socket_keepalive": True,
        "health_check_interval": 15,
        "retry": Retry(ExponentialBackoff(cap=0.25, base=0.05), RETRIES),
        "retry_on_error": [redis.ConnectionError, redis.TimeoutError],
    }
    if urlsplit(url).scheme == "unix":
        del options["socket_keepalive"]
    return options


def cluster_options() -> dict[str, Any]:
    """Keyword arguments of a cluster client (``redis.cluster.RedisCluster.from_url``).

    The timeouts of :func:`client_options`; its ``retry`` is the cluster
    client's own (redis-py retries a command there, on a fresh slot map, and
    gives the node connections none), and redis-py's cluster client takes
    neither ``health_check_interval`` nor ``retry_on_error`` (it retries on
    connection and timeout errors, and refreshes its slot map after them).
    """
    options = client_options()
    for unsupported in ("health_check_interval", "retry_on_error"):
        del options[unsupported]
    return options


def sentinel_options(retry: Retry | AsyncRetry) -> dict[str, Any]:
    """Keyword arguments of the connections to the sentinels: short timeouts and no retry
    (the next sentinel is asked instead), then ``RQUEUE["SENTINEL_KWARGS"]`` over them."""
    return {
        "socket_connect_timeout": CONNECT_TIMEOUT,
        "socket_timeout": SENTINEL_TIMEOUT,
        "socket_keepalive": True,
        "retry": retry,
        **get_config().sentinel_kwargs,
    }


def service_of(url: str) -> tuple[str, dict[str, Any]]:
    """The service name of ``redis[s]://[user:password@]<service>/<db>`` and the options of
    its master's connections (username, password, db, query options; ``ssl`` for ``rediss``).

    The name keeps its case (``urlsplit().hostname`` would lower it).
    """
    parts = urlsplit(url)
    service = unquote(parts.netloc.rpartition("@")[2])
    options: dict[str, Any] = parse_url(url)  # type: ignore[no-untyped-call]
    for key in ("host", "port", "path", "connection_class"):
        options.pop(key, None)
    if parts.scheme == "rediss":
        options["ssl"] = True
    return service, options


def _location(queue: str | None) -> Location:
    """Where ``queue``'s Redis is configured (the global Redis when ``None``)."""
    config = get_config()
    url = config.queue(queue).redis_url if queue is not None else None
    if url is None and config.cache_alias is not None:
        return Location(LocationKind.CACHE, config.cache_alias)
    url = url or config.redis_url or ""
    if config.redis_cluster:
        return Location(LocationKind.CLUSTER, url)
    if config.sentinels:
        options = repr(sorted(config.sentinel_kwargs.items()))
        return Location(LocationKind.SENTINEL, url, config.sentinels, options)
    return Location(LocationKind.URL, url)


def _sentinel_client(location: Location) -> redis.Redis:
    """A client of the master ``location`` names, through its sentinels (one ``Sentinel`` object
    per sentinel set and options, shared by the services it monitors)."""
    key = (location.sentinels, location.sentinel_options)
    manager = _sentinels.get(key)
    if manager is None:
        manager = _sentinels[key] = redis.sentinel.Sentinel(  # type: ignore[no-untyped-call]
            list(location.sentinels), sentinel_kwargs=sentinel_options(Retry(NoBackoff(), 0))
        )
    service, options = service_of(location.where)
    client: redis.Redis = manager.master_for(  # type: ignore[no-untyped-call]
        service, **(client_options() | options)
    )
    return client


class _AsyncSentinelMaster(redis.asyncio.Redis):
    """An asyncio master client that owns its ``Sentinel``: closing it closes the connections
    to the sentinels too (both belong to one event loop)."""

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        await super().aclose(close_connection_pool)
        manager = getattr(self.connection_pool, "sentinel_manager", None)
        if manager is not None:
            await manager.aclose()


def _cluster_client(location: Location) -> redis.Redis:
    """A cluster client of the cluster a node of which ``location`` names.

    redis-py's cluster client asks that node for the slot map as it is made.

    Raises:
        RedisUnavailable: the node does not answer.
    """
    try:
        cluster = redis.cluster.RedisCluster.from_url(location.where, **cluster_options())
    except (RedisClusterException, redis.ConnectionError) as exc:
        raise RedisUnavailable(f"Redis Cluster is unreachable: {exc}") from exc
    return cast(redis.Redis, cluster)


def get_client(queue: str | None = None) -> redis.Redis:
    """Return the Redis client of ``queue`` (the global one when ``None``).

    A queue with its own ``REDIS_URL`` in ``QUEUES`` gets its own client;
    otherwise ``REDIS_URL`` or the django-redis cache ``CACHE_ALIAS`` is used.
    With ``REDIS_CLUSTER`` it is a ``redis.cluster.RedisCluster`` (module docstring).

    Raises:
        RedisUnavailable: with ``REDIS_CLUSTER``, the first call for a cluster finds its
            node unreachable (the cluster client reads the slot map as it is made).
        ValueError: ``queue`` is not declared.
        django.core.exceptions.ImproperlyConfigured: ``RQUEUE`` is invalid.
    """
    config = get_config()
    known = _by_queue.get(queue)
    if known is not None and known[0] is config:
        return known[1]
    location = _location(queue)
    client = _clients.get(location)
    if client is None:
        if location.kind is LocationKind.CACHE:
            from django_redis import get_redis_connection

            client = get_redis_connection(location.where)
        elif location.kind is LocationKind.SENTINEL:
            client = _sentinel_client(location)
        elif location.kind is LocationKind.CLUSTER:
            client = _cluster_client(location)
        else:
            client = redis.Redis.from_url(location.where, **client_options(location.where))
        _clients[location] = client
    _by_queue[queue] = (config, client)
    return client


def new_async_client(queue: str) -> redis.asyncio.Redis | None:
    """A new asyncio client of ``queue``, with :func:`client_options`; the caller closes it.

    Not cached: an asyncio client belongs to the event loop it first ran on.
    ``None`` when the queue's Redis is the django-redis cache ``CACHE_ALIAS``,
    which has no asyncio client (callers run the sync code in a thread then).
    """
    location = _location(queue)
    if location.kind is LocationKind.CACHE:
        return None
    return _async_client(location)


def _async_client(location: Location) -> redis.asyncio.Redis:
    retry = AsyncRetry(ExponentialBackoff(cap=0.25, base=0.05), RETRIES)
    options = client_options(location.where) | {"retry": retry}
    if location.kind is LocationKind.CLUSTER:
        # The asyncio cluster client takes health_check_interval and retry_on_error.
        cluster = redis.asyncio.cluster.RedisCluster.from_url(location.where, **options)
        return cast(redis.asyncio.Redis, cluster)
    if location.kind is not LocationKind.SENTINEL:
        return redis.asyncio.Redis.from_url(location.where, **options)
    manager = redis.asyncio.sentinel.Sentinel(  # type: ignore[no-untyped-call]
        list(location.sentinels), sentinel_kwargs=sentinel_options(AsyncRetry(NoBackoff(), 0))
    )
    service, url_options = service_of(location.where)
    client: redis.asyncio.Redis = manager.master_for(
        service, redis_class=_AsyncSentinelMaster, **(options | url_options)
    )
    return client


def get_async_client(queue: str) -> redis.asyncio.Redis | None:
    """The asyncio client of ``queue`` for the running event loop (cached per loop and location).

    ``None`` with ``CACHE_ALIAS``, as :func:`new_async_client`. Call it from a
    coroutine; :func:`close_async_clients` closes the loop's clients.
    """
    location = _location(queue)
    if location.kind is LocationKind.CACHE:
        return None
    clients = _async_clients.setdefault(asyncio.get_running_loop(), {})
    client = clients.get(location)
    if client is None:
        client = clients[location] = _async_client(location)
    return client


async def close_async_clients() -> None:
    """Close the running event loop's cached asyncio clients (:func:`get_async_client`)."""
    clients = _async_clients.pop(asyncio.get_running_loop(), {})
    for client in clients.values():
        await client.aclose()


def location_of(queue: str | None) -> Location:
    """Where ``queue``'s Redis is (the global Redis when ``None``): queues with the same
    location share a client (:func:`get_client`), and so a server, a cluster or a cache.

    Raises:
        ValueError: ``queue`` is not declared.
    """
    return _location(queue)


def reset_clients() -> None:
    """Forget cached clients (after a fork in a supervisor, or in tests)."""
    for client in _clients.values():
        client.close()
    _clients.clear()
    _by_queue.clear()
    for manager in _sentinels.values():
        manager.close()
    _sentinels.clear()


def reset_after_fork() -> None:
    """In a forked child: forget the parent's clients without closing the parent's sockets.

    redis-py's pools would notice the fork by themselves; dropping the cache
    also drops clients borrowed from django-redis, which do not.
    """
    _clients.clear()
    _by_queue.clear()
    _sentinels.clear()
