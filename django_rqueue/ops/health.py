"""Checks of the Redis server a worker is about to use.

A Redis that may evict keys silently destroys queues (under memory pressure
Redis 7.0 with ``allkeys-lru`` drops job hashes and queue lists like any
other key; Redis docs, "Key eviction"), so a worker refuses to start unless
``maxmemory-policy`` is ``noeviction``. Wrong credentials and a user
without scripting rights fail fast with the fix.
No persistence is only a warning: it is a deployment choice, but a Redis
restart then loses every job.

A user whose ACL lacks a command django-rqueue sends, or whose key patterns
do not cover ``KEY_PREFIX``, is refused too, naming what is missing
(:mod:`~.engine.permissions` probes without changing anything); a refused
``CLIENT UNBLOCK`` is only a warning: workers fall back to short blocking calls.

The same checks run in ``manage.py check --deploy`` (``rqueue.E010``…).
On a Redis Cluster every master is checked, and named in the messages
(``Redis node 10.0.0.5:7001: ...``): each holds some of the queues.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import redis
from django.core import checks
from django.core.checks import CheckMessage
from redis.exceptions import AuthenticationError, NoPermissionError, ResponseError

from ..conf import get_config
from ..engine import permissions
from ..engine.connection import (
    CERTIFICATE_HINT,
    Location,
    certificate_refused,
    get_client,
    is_cluster,
    location_of,
    servers,
)
from ..engine.keys import permission_probe_key
from ..engine.queue_ref import queue_ref
from ..engine.scripts import load
from ..exceptions import RedisUnavailable

#: Check ids of the permission checks.
MISSING_COMMANDS = "rqueue.E120"
MISSING_KEYS = "rqueue.E121"
NO_UNBLOCK = "rqueue.W120"


def probe_keys(queues: Sequence[str], *, shared: bool) -> list[str]:
    """The keys the permission check probes for ``queues`` (all on one Redis): one under
    each queue's hash tag and, with ``shared`` (the default Redis, which holds the keys
    shared by every queue), one among those. None of them is ever written."""
    found = [queue_ref(queue).keys.permission_probe for queue in queues]
    return found + [permission_probe_key(get_config().key_prefix)] if shared else found


def redis_problems(client: redis.Redis, where: str, keys: Sequence[str] = ()) -> list[CheckMessage]:
    """Return what is wrong with the Redis behind ``client`` (named ``where`` in messages):
    with a cluster client, with each of its masters (``"<where> node <host:port>"``).

    Each problem is a ``checks.Error`` or a ``checks.Warning``. ``keys``: the keys to
    check the user's key patterns with (:func:`probe_keys`); none: commands only.

    Ids: E010 maxmemory-policy is not noeviction; E011 authentication failed
    (WRONGPASS / NOAUTH); E012 the user may not run INFO or scripts (NOPERM); E013
    Redis unreachable; E014 its TLS certificate failed verification (a
    configuration error: a worker refuses to start, it does not wait as for an
    outage); W010 neither AOF nor RDB snapshots are on; E120 the user's ACL
    lacks commands django-rqueue sends; E121 its key patterns do not cover those
    ``keys``; W120 it may not run ``CLIENT UNBLOCK`` (idle waits fall back to short
    blocking calls, :mod:`~django_rqueue.worker.idle`).
    """
    found: list[CheckMessage] = []
    commands = needed_commands(cluster=is_cluster(client))
    for node, server in servers(client):
        label = f"{where} node {node}" if node else where
        found += _server_problems(server, label, keys, commands)
    return found


def needed_commands(*, cluster: bool = False) -> list[str]:
    """The commands of :data:`~.engine.permissions.COMMANDS` the current settings use:
    ``WAIT`` only with ``MIN_REPLICAS_ACK``; ``SELECT`` is left to the connection (it
    fails on its own when the URL's database needs it); with ``cluster``, the cluster
    client's too."""
    skip = {"select"} | (set() if get_config().min_replicas_ack else {"wait"})
    names = [*permissions.COMMANDS, *(permissions.CLUSTER_COMMANDS if cluster else ())]
    return [name for name in names if name not in skip]


def _server_problems(
    client: redis.Redis, where: str, keys: Sequence[str], commands: Sequence[str]
) -> list[CheckMessage]:
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
        command = permissions.refused_command(exc)
        if command not in (None, "info"):  # the connection's own (SELECT of the URL's db)
            return [_missing_commands(where, [command])]
        return [
            checks.Error(
                f"{where}: the Redis user may not run INFO ({exc}).",
                hint="Grant +info to the user in its ACL (the checks read the eviction "
                "policy and persistence with it).",
                id="rqueue.E012",
            )
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
    try:
        return _answered_problems(client, where, keys, commands, memory, persistence)
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        # It went away after INFO (a worker starting as Redis crashes): unreachable, which
        # a worker's startup gate waits out, rather than an exception that ends the worker.
        return [checks.Error(f"{where} is unreachable ({exc}).", id="rqueue.E013")]


def _answered_problems(
    client: redis.Redis,
    where: str,
    keys: Sequence[str],
    commands: Sequence[str],
    memory: Mapping[str, Any],
    persistence: Mapping[str, Any],
) -> list[CheckMessage]:
    """:func:`_server_problems` of a server that answered ``INFO`` (its ``memory`` and
    ``persistence`` sections)."""
    found = _permission_problems(client, where, keys, commands)
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


def _permission_problems(
    client: redis.Redis, where: str, keys: Sequence[str], commands: Sequence[str]
) -> list[CheckMessage]:
    """E120, E121 and W120 of one server (:func:`redis_problems`)."""
    try:
        missing = permissions.missing(client, keys, commands)
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        return [checks.Error(f"{where} is unreachable ({exc}).", id="rqueue.E013")]
    found: list[CheckMessage] = []
    required = [c for c in missing.commands if c not in permissions.OPTIONAL]
    if required:
        found.append(_missing_commands(where, required))
    if missing.keys:
        prefix = get_config().key_prefix
        found.append(
            checks.Error(
                f"{where}: the Redis user may not use django-rqueue's keys "
                f"(refused: {', '.join(missing.keys)}).",
                hint=f"Add the key pattern ~{prefix}:* to the user's ACL "
                f"(RQUEUE['KEY_PREFIX'] is {prefix!r}).",
                id=MISSING_KEYS,
            )
        )
    if "client|unblock" in missing.commands:
        found.append(
            checks.Warning(
                f"{where}: the Redis user may not run CLIENT UNBLOCK, so a worker cannot end "
                "its other blocking calls when one returns: idle waits fall back to short "
                "blocking calls, and a job can start up to about 0.2 s late when a worker "
                "waits on several servers (or runs async jobs).",
                hint="Grant +client|unblock to the user in its ACL.",
                id=NO_UNBLOCK,
            )
        )
    return found


def _missing_commands(where: str, commands: Sequence[str]) -> CheckMessage:
    return checks.Error(
        f"{where}: the Redis user may not run {', '.join(commands)} (NOPERM).",
        hint=f"Grant {' '.join('+' + c for c in commands)} to the user in its ACL "
        "(the documentation's 'Secure it' how-to gives every rule django-rqueue needs).",
        id=MISSING_COMMANDS,
    )


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
    shared = location_of(None)
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
        on_it = [q for q in queues if location_of(q) == server]
        keys = probe_keys(on_it, shared=server == shared)
        found[server] = redis_problems(client, where, keys)
    return found
