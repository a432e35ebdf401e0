"""Send script calls of one location in one ``MULTI``/``EXEC``: all of them run, or none.

A workflow created in one step is one transaction on one Redis server (or one Cluster
slot): the record and every batch of nodes. redis-py's cluster pipeline refuses
``EVALSHA``, so under Redis Cluster the transaction goes to the master that serves the
first call's slot, on a client of that master alone (every call must be of that slot).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis
from redis.exceptions import ExecAbortError, NoScriptError, ResponseError

from ..engine.commands import Command
from ..engine.connection import redis_errors
from ..engine.scripts import load
from ..engine.servers import as_cluster


def execute_multi(client: redis.Redis, commands: Sequence[Command[Any]]) -> list[Any]:
    """Run ``commands`` in one ``MULTI``/``EXEC`` on ``client``'s location and return each
    parsed reply, in order.

    A script Redis does not have (``NOSCRIPT``) is loaded and the whole transaction sent
    again, so each call must be idempotent (a creation answers ``exists`` the second time).

    Raises:
        RedisUnavailable: Redis cannot be reached, or (Cluster) the slot is moving.
        redis.ResponseError: Redis refused a call.
    """
    if not commands:
        return []
    with redis_errors(client):
        target = _master_of(client, commands[0].call.keys[0])
        replies = _send(target, commands)
        if _lacks_script(replies):
            for name in dict.fromkeys(c.call.script for c in commands):
                load(name).ensure_loaded(target)
            replies = _send(target, commands)
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    return [c.parse(r) for c, r in zip(commands, replies, strict=True)]


def _send(target: redis.Redis, commands: Sequence[Command[Any]]) -> list[Any]:
    pipe = target.pipeline(transaction=True)
    for command in commands:
        load(command.call.script).queue_in(pipe, command.call.keys, command.call.args)
    try:
        replies: list[Any] = pipe.execute(raise_on_error=False)
    except (ExecAbortError, NoScriptError) as exc:  # refused when queued: nothing ran
        return [exc]
    except ResponseError as exc:
        if "NOSCRIPT" in str(exc):
            return [NoScriptError(str(exc))]
        raise
    return replies


def _lacks_script(replies: Sequence[Any]) -> bool:
    return any(
        isinstance(r, NoScriptError | ExecAbortError)
        or (isinstance(r, ResponseError) and "NOSCRIPT" in str(r))
        for r in replies
    )


def _master_of(client: redis.Redis, key: str) -> redis.Redis:
    """``client``, or under Cluster a client of the master serving ``key`` now."""
    cluster = as_cluster(client)
    if cluster is None:
        return client
    node = cluster.get_node_from_key(key)  # type: ignore[no-untyped-call]
    master: redis.Redis = cluster.get_redis_connection(node)
    return master
