"""Redis connections, per queue, built from the ``RQUEUE`` setting at call time.

Clients are cached per location (URL or cache alias) and process: redis-py's
connection pool notices a fork and opens fresh sockets in the child.

Timeouts are short and finite so that an unreachable Redis surfaces within
about 2 s instead of hanging a request or a worker: connect timeout 0.5 s,
two retries with exponential backoff (50 ms base, 250 ms cap), socket
timeout 10 s (longer than any blocking call django-rqueue makes), TCP
keepalive on, and a health check of idle connections every 15 s.
"""

from __future__ import annotations

from typing import Any

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from ..conf import get_config

#: Seconds to wait for a TCP connect before retrying.
CONNECT_TIMEOUT = 0.5
#: Seconds to wait for any reply; blocking calls use shorter server-side timeouts.
SOCKET_TIMEOUT = 10.0
#: Retries after a failed connect or a dropped connection.
RETRIES = 2

_clients: dict[tuple[str, str], redis.Redis] = {}


def client_options() -> dict[str, Any]:
    """Keyword arguments django-rqueue passes to ``redis.Redis.from_url``."""
    return {
        "socket_connect_timeout": CONNECT_TIMEOUT,
        "socket_timeout": SOCKET_TIMEOUT,
        "socket_keepalive": True,
        "health_check_interval": 15,
        "retry": Retry(ExponentialBackoff(cap=0.25, base=0.05), RETRIES),
        "retry_on_error": [redis.ConnectionError, redis.TimeoutError],
    }


def get_client(queue: str | None = None) -> redis.Redis:
    """Return the Redis client of ``queue`` (the global one when ``None``).

    A queue with its own ``REDIS_URL`` in ``QUEUES`` gets its own client;
    otherwise ``REDIS_URL`` or the django-redis cache ``CACHE_ALIAS`` is used.

    Raises:
        ValueError: ``queue`` is not declared.
        django.core.exceptions.ImproperlyConfigured: ``RQUEUE`` is invalid.
    """
    config = get_config()
    url = config.queue(queue).redis_url if queue is not None else None
    if url is None and config.cache_alias is not None:
        location = ("cache", config.cache_alias)
    else:
        location = ("url", url or config.redis_url or "")
    client = _clients.get(location)
    if client is None:
        if location[0] == "cache":
            from django_redis import get_redis_connection

            client = get_redis_connection(location[1])
        else:
            client = redis.Redis.from_url(location[1], **client_options())
        _clients[location] = client
    return client


def reset_clients() -> None:
    """Forget cached clients (after a fork in a supervisor, or in tests)."""
    for client in _clients.values():
        client.close()
    _clients.clear()
