"""Calls of one idempotent Lua script, pipelined a few deep on one connection.

``delay_many`` writes its jobs in batches (``enqueue_batch.lua``, one call per
batch). Calling the script batch after batch leaves Python idle while Redis
runs a batch and Redis idle while Python encodes the next one. Here call
``k + 1`` is sent before the reply of call ``k`` is read (Redis pipelining,
https://redis.io/docs/latest/develop/use/pipelining/), so the two overlap; the
replies still come back in order.

Only for scripts that are idempotent per call, as ``enqueue_batch.lua`` is (a
resent batch reports its jobs as ``exists``): a call whose reply is unknown
(the connection broke, or Redis answered ``NOSCRIPT`` after losing its script
cache) is made again synchronously with :class:`~.scripts.LuaScript`, which
has redis-py's retries and loads the script when it is missing.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

import redis
from redis.exceptions import NoScriptError

from .scripts import LuaScript

#: ``(KEYS, ARGV)`` of one script call.
Call = tuple[list[str], list[str | int | float]]

#: Calls in flight at once: two is enough to overlap one encoder with one Redis.
DEPTH = 2


def pipelined(
    client: redis.Redis, script: LuaScript, calls: Iterable[Call], depth: int = DEPTH
) -> Iterator[Any]:
    """Yield the reply of each call in ``calls``, in order, keeping up to ``depth`` in flight.

    ``calls`` is consumed lazily: the next call is built (and sent) while
    Redis runs the ones before it. An error reply of the script itself is
    raised as redis-py raises it (``redis.ResponseError``); connection and
    timeout errors of the synchronous resend propagate as redis-py raises them.
    """
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth!r}")
    pool = client.connection_pool
    connection: Any = pool.get_connection()
    #: Calls sent and not read yet, each with whether it went out on ``connection``.
    in_flight: deque[tuple[Call, bool]] = deque()

    def drop() -> None:
        nonlocal connection
        if connection is not None:
            connection.disconnect()
            pool.release(connection)
            connection = None

    def read_one() -> Any:  # noqa: ANN401 - a Lua reply
        call, sent = in_flight.popleft()
        if sent and connection is not None:
            try:
                return connection.read_response()
            except NoScriptError:
                pass  # Redis lost its script cache: the resend below loads it
            except (redis.ConnectionError, redis.TimeoutError):
                drop()  # every reply still owed on it is lost: resend those too
        return script(client, *call)

    try:
        for call in calls:
            sent = False
            if connection is not None:
                try:
                    # No health check: its PING would read a reply owed to an earlier call.
                    connection.send_command(
                        "EVALSHA", script.sha, len(call[0]), *call[0], *call[1], check_health=False
                    )
                    sent = True
                except (redis.ConnectionError, redis.TimeoutError):
                    drop()
            in_flight.append((call, sent))
            while len(in_flight) >= depth:
                yield read_one()
        while in_flight:
            yield read_one()
    finally:
        if in_flight:
            drop()  # replies still owed: the connection is out of step
        elif connection is not None:
            pool.release(connection)
