"""Send script calls of one location in one ``MULTI``/``EXEC``: all of them run, or none.

A workflow created in one step is one transaction on one Redis server (or one Cluster
slot): the record and every batch of nodes; so is a ``depends_on`` job whose parents are
all on its queue. redis-py's cluster pipeline refuses
``EVALSHA``, so under Redis Cluster the transaction goes to the master that serves the
first call's slot, on a client of that master alone (every call must be of that slot).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis
from redis.exceptions import NoScriptError, ResponseError

from ..engine.commands import Command
from ..engine.connection import redis_errors
from ..engine.errors import REDIRECTED
from ..engine.run import ReplicaWait
from ..engine.scripts import load
from ..engine.servers import as_cluster


def execute_multi(
    client: redis.Redis, commands: Sequence[Command[Any]], wait: ReplicaWait | None = None
) -> tuple[list[Any], int]:
    """Run ``commands`` in one ``MULTI``/``EXEC`` on ``client``'s location; return each
    parsed reply, in order, and the replicas that confirmed the transaction (``WAIT``
    right after the ``EXEC`` on the same connection, in the same round trip, when ``wait``
    is given; else 0).

    A script Redis does not have (``NOSCRIPT``) is loaded and the whole transaction sent
    again, so each call must be idempotent (a creation answers ``exists`` the second time).

    Raises:
        RedisUnavailable: Redis cannot be reached, or (Cluster) the slot is moving (a
            ``MOVED``/``ASK`` refreshes the slot map first, so a retry reaches the new
            master; nothing of the transaction ran).
        redis.ResponseError: Redis refused a call.
    """
    if not commands:
        return [], 0
    with redis_errors(client):
        target = _master_of(client, commands[0].call.keys[0])
        replies, acked = _send(target, commands, wait)
        if _lacks_script(replies):
            for name in dict.fromkeys(c.call.script for c in commands):
                load(name).ensure_loaded(target)
            replies, acked = _send(target, commands, wait)
        for reply in replies:
            if isinstance(reply, REDIRECTED):
                _refresh_slots(client)  # the slot moved: the next try goes to its new master
            if isinstance(reply, Exception):
                raise reply  # a redirection as RedisUnavailable (SlotMoving): retried
    return [c.parse(r) for c, r in zip(commands, replies, strict=True)], acked


def _send(
    target: redis.Redis, commands: Sequence[Command[Any]], wait: ReplicaWait | None
) -> tuple[list[Any], int]:
    """``MULTI``, the calls, ``EXEC`` (and ``WAIT``) in one pipeline on one connection:
    the replies of the calls (exceptions in place of refused ones) and the replicas."""
    pipe = target.pipeline(transaction=False)
    pipe.execute_command("MULTI")  # type: ignore[no-untyped-call]
    for command in commands:
        load(command.call.script).queue_in(pipe, command.call.keys, command.call.args)
    pipe.execute_command("EXEC")  # type: ignore[no-untyped-call]
    if wait is not None:
        pipe.wait(wait.replicas, wait.timeout_ms)
    got: list[Any] = pipe.execute(raise_on_error=False)
    executed = got[len(commands) + 1]
    acked = int(got[-1]) if wait is not None and not isinstance(got[-1], Exception) else 0
    if isinstance(executed, Exception) or executed is None:
        # Refused when queued (EXECABORT: nothing ran): the first refusal says why.
        queued = [r for r in got[1 : len(commands) + 1] if isinstance(r, Exception)]
        return [queued[0] if queued else executed], acked
    return list(executed), acked


def _lacks_script(replies: Sequence[Any]) -> bool:
    return any(
        isinstance(r, NoScriptError) or (isinstance(r, ResponseError) and "NOSCRIPT" in str(r))
        for r in replies
    )


def _refresh_slots(client: redis.Redis) -> None:
    """Have a cluster client read the slot map again (its cache is only refreshed by the
    redirections it follows itself, and this transaction bypassed it)."""
    cluster = as_cluster(client)
    if cluster is not None:
        cluster.nodes_manager.initialize()


def _master_of(client: redis.Redis, key: str) -> redis.Redis:
    """``client``, or under Cluster a client of the master serving ``key`` now."""
    cluster = as_cluster(client)
    if cluster is None:
        return client
    node = cluster.get_node_from_key(key)  # type: ignore[no-untyped-call]
    master: redis.Redis = cluster.get_redis_connection(node)
    return master
