"""Checks of the Redis server a worker is about to use.

A Redis that may evict keys silently destroys queues (under memory pressure
Redis 7.0 with ``allkeys-lru`` drops job hashes and queue lists like any
other key; Redis docs, "Key eviction"), so a worker refuses to start unless
``maxmemory-policy`` is ``noeviction``. Wrong credentials and a user
without scripting rights fail fast with the fix.
No persistence is only a warning: it is a deployment choice, but a Redis
restart then loses every job.

The same checks run in ``manage.py check --deploy`` (``rqueue.E010``…).
On a Redis Cluster every master is checked, and named in the messages
(``Redis node 10.0.0.5:7001: ...``): each holds some of the queues.
"""

from __future__ import annotations

import redis
from django.core import checks
from django.core.checks import CheckMessage
from redis.exceptions import AuthenticationError, NoPermissionError, ResponseError

from .conf import get_config
from .engine.connection import (
    CERTIFICATE_HINT,
    Location,
    certificate_refused,
    get_client,
    location_of,
    servers,
)
from .engine.scripts import load
from .exceptions import RedisUnavailable


def redis_problems(client: redis.Redis, where: str) -> list[CheckMessage]:
    """Return what is wrong with the Redis behind ``client`` (named ``where`` in messages):
    with a cluster client, with each of its masters (``"<where> node <host:port>"``).

    Each problem is a ``checks.Error`` or a ``checks.Warning``.

    Ids: E010 maxmemory-policy is not noeviction; E011 authentication failed
    (WRONGPASS / NOAUTH); E012 the user may not run scripts (NOPERM); E013
    Redis unreachable; E014 its TLS certificate failed verification (a
    configuration error: a worker refuses to start, it does not wait as for an
    outage); W010 neither AOF nor RDB snapshots are on.
    """
    found: list[CheckMessage] = []
    for node, server in servers(client):
        found += _server_problems(server, f"{where} node {node}" if node else where)
    return found


def _server_problems(client: redis.Redis, where: str) -> list[CheckMessage]:
    """:func:`redis_problems` of one server."""
    try:
        memory = client.info("memory")
        persistence = client.info("persistence")
    except AuthenticationError as exc:
        return [
            checks.Error(
                f"{where} rejected the credentials ({exc}).",
                hint="Fix the user/password in the Redis URL (redis://user:password@host:port/db).",
                id="rqueue.E011",
            )
        ]
    except NoPermissionError as exc:
        return [
            checks.Error(f"{where}: the Redis user may not run INFO ({exc}).", id="rqueue.E012")
        ]
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        refused = certificate_refused(exc)
        if refused is not None:
            return [
                checks.Error(
                    f"{where}: its TLS certificate was refused ({refused.verify_message}).",
                    hint=CERTIFICATE_HINT,
                    id="rqueue.E014",
                )
            ]
        return [checks.Error(f"{where} is unreachable ({exc}).", id="rqueue.E013")]
    found: list[CheckMessage] = []
    policy = memory.get("maxmemory_policy", "noeviction")
    if policy != "noeviction":
        found.append(
            checks.Error(
                f"{where}: maxmemory-policy is {policy!r}; Redis may evict queued jobs.",
                hint="Set 'maxmemory-policy noeviction' in redis.conf "
                "(or CONFIG SET maxmemory-policy noeviction).",
                id="rqueue.E010",
            )
        )
    try:
        load("reserve").ensure_loaded(client)
    except NoPermissionError as exc:
        found.append(
            checks.Error(
                f"{where}: the Redis user may not run Lua scripts ({exc}).",
                hint="Grant +@scripting (EVALSHA, SCRIPT LOAD) to the user in its ACL.",
                id="rqueue.E012",
            )
        )
    if not persistence.get("aof_enabled") and not _snapshots_on(client):
        found.append(
            checks.Warning(
                f"{where}: persistence is off (no AOF, no RDB snapshots); "
                "a Redis restart loses every job.",
                hint="Enable 'appendonly yes' (appendfsync everysec or always).",
                id="rqueue.W010",
            )
        )
    return found


def _snapshots_on(client: redis.Redis) -> bool:
    try:
        save = client.config_get("save").get("save", "")
    except ResponseError:  # CONFIG may be renamed or forbidden: assume the operator knows
        return True
    return bool(str(save).strip())


def server_label(queue: str) -> str:
    """How messages name the Redis of ``queue``: ``"Redis at <its URL without the password>"``,
    after ``"queue '<queue>': "`` when the queue has a ``REDIS_URL`` of its own.

    Raises:
        ValueError: ``queue`` is not declared.
    """
    where = f"Redis at {location_of(queue).display}"
    return f"queue {queue!r}: {where}" if get_config().queue(queue).redis_url else where


def problems_for(queues: list[str]) -> list[CheckMessage]:
    """Check each distinct Redis used by ``queues`` (once each); see :func:`redis_problems`."""
    return [p for found in problems_by_server(queues).values() for p in found]


def problems_by_server(queues: list[str]) -> dict[Location, list[CheckMessage]]:
    """:func:`redis_problems` of each distinct Redis used by ``queues``, by its location.

    A cluster none of whose nodes answers is one E013 (no client can be made).
    """
    found: dict[Location, list[CheckMessage]] = {}
    for queue in queues:
        server = location_of(queue)
        if server in found:
            continue
        where = server_label(queue)
        try:
            client = get_client(queue)
        except RedisUnavailable as exc:
            found[server] = [checks.Error(f"{where}: {exc}.", id="rqueue.E013")]
            continue
        found[server] = redis_problems(client, where)
    return found
