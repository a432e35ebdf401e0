"""A pooled connection of the asyncio client is reset while idle (the server restarted,
a load balancer dropped it): the next command runs, or fails as RedisUnavailable, which
every caller retries. On Python 3.12, 3.13.0-3.13.9 and 3.14.0 asyncio raises its own
error from that write instead of a connection error (CPython gh-136234, redis-py
#4287); django_rqueue.engine.errors reads it as the connection lost."""

from __future__ import annotations

import asyncio

import redis.asyncio

from django_rqueue.engine.connection import redis_errors
from django_rqueue.exceptions import RedisUnavailable

from .proxy import FaultProxy


def test_a_command_on_an_idle_connection_that_was_reset_runs_or_is_redis_unavailable(
    proxy: FaultProxy,
) -> None:
    async def scenario() -> object:
        client = redis.asyncio.Redis.from_url(proxy.url())
        try:
            await client.ping()  # one pooled connection, idle from now on
            [connection] = client.connection_pool._available_connections
            writer = connection._writer
            assert writer is not None
            assert proxy.reset_all() >= 1  # ECONNRESET on the idle connection
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 5
            while not writer.transport.is_closing():  # the loop saw the reset
                assert loop.time() < deadline, "the reset went unseen"
                await asyncio.sleep(0.01)
            try:
                with redis_errors(client):
                    return await client.ping()
            except RedisUnavailable as exc:
                return exc
        finally:
            await client.aclose()

    outcome = asyncio.run(scenario())
    assert outcome is True or isinstance(outcome, RedisUnavailable), outcome
