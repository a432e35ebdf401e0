"""The Redis ACL permissions django-rqueue needs, and a check that a server grants them.

:data:`COMMANDS` names every command django-rqueue sends, from Python and from its
Lua scripts (Redis checks a script's commands against the caller's ACL too), by its
ACL name (``client|unblock``: a subcommand); :data:`CLUSTER_COMMANDS` those redis-py's
cluster client adds (the slot map, key lookups, ``ASK`` redirects).
:func:`acl_rules` is the least-privilege ``ACL SETUSER`` line the "Secure it" how-to gives:
those commands only (no category: ``+@read`` would grant ``SCAN`` over every key of
the database, ``+@write`` and ``+@scripting`` ``FUNCTION FLUSH`` and ``SCRIPT
FLUSH``, server-wide), keys under ``<KEY_PREFIX>:`` only, no pub/sub channel.

:func:`missing` checks a server without changing anything (``ACL DRYRUN`` would need a
permission of its own, ``@admin``): on a connection of its own it sends ``EXEC`` outside
a transaction (Redis checks the ACL before it answers "EXEC without MULTI"), then
``MULTI``, then every other command with harmless arguments on keys that are never
written (:attr:`~.keys.QueueKeys.permission_probe`), and drops the connection. Redis
checks the ACL of a command inside ``MULTI`` when it is queued, answering ``NOPERM``
for a refused command or key, and discards the transaction of a connection that
closes: nothing is ever run (Redis 7.0 source, ``processCommand``: the ACL check comes
before ``queueMultiCommand``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import redis
from redis.exceptions import NoPermissionError

#: In a probe's arguments: the key the command is queued on.
KEY = object()
#: A script SHA1 that no script has ("EVALSHA" of it is only ever queued).
NO_SCRIPT = "0" * 40

#: Every command django-rqueue sends, by ACL name, with harmless arguments for the probe
#: (:data:`KEY`: a key that is never written). In the order of the documented line.
COMMANDS: dict[str, tuple[Any, ...]] = {
    # Connections: redis-py checks an idle connection with PING before it reuses it.
    "ping": ("PING",),
    # The transition scripts, and their loading after a Redis restart or SCRIPT FLUSH.
    "evalsha": ("EVALSHA", NO_SCRIPT, 1, KEY),
    "script|load": ("SCRIPT", "LOAD", "return 0"),
    "script|exists": ("SCRIPT", "EXISTS", NO_SCRIPT),
    # The startup checks (eviction policy, persistence) and rqueue_info.
    "info": ("INFO", "memory"),
    # Redis server time, for the poller's beats and the queries.
    "time": ("TIME",),
    # Idle workers blocked on several servers wake each other's other calls.
    "client|id": ("CLIENT", "ID"),
    "client|unblock": ("CLIENT", "UNBLOCK", 0),
    # Job.wait() passes its wake-up on in one transaction.
    "multi": (),
    "exec": (),
    # RQUEUE["MIN_REPLICAS_ACK"] (durable enqueue).
    "wait": ("WAIT", 0, 0),
    # A Redis URL with a database other than 0.
    "select": ("SELECT", 0),
    # Keys: what the scripts, the admin, the heartbeat and the queries read and write.
    "del": ("DEL", KEY),
    "exists": ("EXISTS", KEY),
    "expire": ("EXPIRE", KEY, 60),
    "pexpire": ("PEXPIRE", KEY, 60_000),
    "persist": ("PERSIST", KEY),
    "get": ("GET", KEY),
    "type": ("TYPE", KEY),  # the scripts say what is wrong with a corrupt record
    "set": ("SET", KEY, "x"),
    "hdel": ("HDEL", KEY, "f"),
    "hexists": ("HEXISTS", KEY, "f"),
    "hget": ("HGET", KEY, "f"),
    "hgetall": ("HGETALL", KEY),
    "hincrby": ("HINCRBY", KEY, "f", 1),
    "hmget": ("HMGET", KEY, "f"),
    "hset": ("HSET", KEY, "f", "x"),
    "hsetnx": ("HSETNX", KEY, "f", "x"),
    "blpop": ("BLPOP", KEY, 1),
    "lindex": ("LINDEX", KEY, 0),
    "lpush": ("LPUSH", KEY, "x"),
    "llen": ("LLEN", KEY),
    "lpop": ("LPOP", KEY),
    "lrange": ("LRANGE", KEY, 0, 0),
    "lrem": ("LREM", KEY, 0, "x"),
    "ltrim": ("LTRIM", KEY, 0, 0),
    "rpush": ("RPUSH", KEY, "x"),
    "sadd": ("SADD", KEY, "x"),
    "sismember": ("SISMEMBER", KEY, "x"),
    "smembers": ("SMEMBERS", KEY),
    "srem": ("SREM", KEY, "x"),
    "zadd": ("ZADD", KEY, 0, "x"),
    "zcard": ("ZCARD", KEY),
    "zcount": ("ZCOUNT", KEY, 0, 0),
    "zrange": ("ZRANGE", KEY, 0, 0),
    "zrem": ("ZREM", KEY, "x"),
    "zremrangebyrank": ("ZREMRANGEBYRANK", KEY, 0, 0),
    "zremrangebyscore": ("ZREMRANGEBYSCORE", KEY, 0, 0),
    "zrevrange": ("ZREVRANGE", KEY, 0, 0),
    "zscore": ("ZSCORE", KEY, "x"),
    # The outbox stream of dependencies on other queues (workflows, depends_on).
    "xadd": ("XADD", KEY, "*", "f", "x"),
    "xlen": ("XLEN", KEY),
    "xrange": ("XRANGE", KEY, "-", "+", "COUNT", 1),
    # The pollers' relay of the outbox: a consumer group, its reads, take-overs and acks.
    "xgroup|create": ("XGROUP", "CREATE", KEY, "relay", "0"),
    "xreadgroup": ("XREADGROUP", "GROUP", "relay", "probe", "COUNT", 1, "STREAMS", KEY, ">"),
    "xautoclaim": ("XAUTOCLAIM", KEY, "relay", "probe", 1, "0-0", "COUNT", 1),
    "xack": ("XACK", KEY, "relay", "0-1"),
    "xdel": ("XDEL", KEY, "0-1"),
}

#: What redis-py's cluster client sends besides (``RQUEUE["REDIS_CLUSTER"]``): the slot
#: map, the command table it finds keys with, and the ``ASKING`` of a redirect.
CLUSTER_COMMANDS: dict[str, tuple[Any, ...]] = {
    "cluster|slots": ("CLUSTER", "SLOTS"),
    "command": ("COMMAND", "COUNT"),
    "asking": ("ASKING",),
}

#: The commands whose refusal the worker works around (:mod:`~django_rqueue.worker.idle`
#: falls back to short blocking calls); a check reports it as a warning, not an error.
OPTIONAL = frozenset({"client|unblock"})

_REFUSED_COMMAND = re.compile(r"permissions to run the '([^']+)' command")


def acl_rules(key_prefix: str, *, cluster: bool = False) -> list[str]:
    """The ``ACL SETUSER`` rules of a user with exactly the permissions django-rqueue needs
    on keys under ``<key_prefix>:`` (``cluster``: with :data:`CLUSTER_COMMANDS` too).

    The user's own rules (``on``, ``>password``) go before them.
    """
    commands = [*COMMANDS, *(CLUSTER_COMMANDS if cluster else ())]
    return [f"~{key_prefix}:*", "resetchannels", "-@all", *(f"+{c}" for c in commands)]


@dataclass(frozen=True)
class Missing:
    """What a server refuses of :data:`COMMANDS` (empty sets: nothing)."""

    #: Refused commands, by ACL name, in :data:`COMMANDS` order.
    commands: tuple[str, ...] = ()
    #: Probe keys the user may not read or write.
    keys: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.commands or self.keys)


def refused_command(exc: NoPermissionError) -> str | None:
    """The ACL name of the command a ``NOPERM`` error refused (``None``: a key or a channel)."""
    found = _REFUSED_COMMAND.search(str(exc))
    return found.group(1) if found else None


def missing(client: redis.Redis, keys: Sequence[str], commands: Iterable[str]) -> Missing:
    """What of ``commands`` (ACL names of :data:`COMMANDS` and :data:`CLUSTER_COMMANDS`) the
    user of ``client`` may not run, and which of ``keys`` (never written; each probed with
    every key command) it may not use.

    ``client`` is a client of one server (a cluster's node: Redis checks the ACL before it
    redirects, so a node answers for keys of any slot). Changes nothing (module docstring).
    A reply other than ``NOPERM`` (a command this server does not have, a redirect) is not
    a refusal. Without ``MULTI`` nothing else is probed (it would run): only ``multi`` (and
    ``exec``) can be reported then.

    Raises redis-py's errors of the connection (unreachable, credentials).
    """
    wanted = list(commands)
    probes = {**COMMANDS, **CLUSTER_COMMANDS}
    refused: set[str] = set()
    bad_keys: list[str] = []
    connection: Any = client.connection_pool.get_connection()
    try:
        for name in ("exec", "multi"):  # EXEC first: outside a transaction it runs nothing
            connection.send_command(name.upper(), check_health=False)
            try:
                connection.read_response()
            except NoPermissionError:
                refused.add(name)
            except redis.ResponseError:
                pass  # "EXEC without MULTI": allowed
        if "multi" in refused:
            return Missing(tuple(c for c in probes if c in refused))
        queued: list[tuple[str, str | None]] = []
        for name in wanted:
            probe = probes[name]
            if not probe:
                continue
            for key in keys if KEY in probe else [None]:
                queued.append((name, key))
                args = (key if arg is KEY else arg for arg in probe)
                # No health check: its PING would be queued too, and answered QUEUED.
                connection.send_command(*args, check_health=False)
        for name, key in queued:
            try:
                connection.read_response()
            except NoPermissionError as exc:
                if refused_command(exc) is not None:
                    refused.add(name)
                elif key is not None and key not in bad_keys:
                    bad_keys.append(key)
            except redis.ResponseError:
                pass
    finally:
        connection.disconnect()  # discards the transaction: nothing queued ever runs
        client.connection_pool.release(connection)
    return Missing(tuple(c for c in probes if c in refused and c in wanted), tuple(bad_keys))
