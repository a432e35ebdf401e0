"""django_rqueue.engine.pipelining: script calls kept two deep in flight, on a real redis-server.

The script used here is idempotent the way ``enqueue_batch.lua`` is: it sets a
key only when absent and counts the sets, so a resent call shows as a counter
that did not move, and a lost call as a key that is missing.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from django_rqueue.engine.pipelining import Call, pipelined
from django_rqueue.engine.scripts import LuaScript

SET_ONCE = LuaScript(
    "test_set_once",
    "if redis.call('SET', KEYS[1], ARGV[1], 'NX') then\n"
    "  redis.call('INCR', KEYS[2])\n"
    "  return {'set', ARGV[1]}\n"
    "end\n"
    "return {'exists', ARGV[1]}\n",
)


def calls(n: int, *, between: dict[int, object] | None = None) -> Iterator[Call]:
    for i in range(n):
        action = (between or {}).get(i)
        if callable(action):
            action()
        yield [f"t:{{q}}:item:{i}", "t:{q}:count"], [str(i)]


def connections_of(client: redis.Redis) -> list[int]:
    """Ids of the server's client connections other than ``client``'s own."""
    own = client.client_id()
    return [int(c["id"]) for c in client.client_list() if int(c["id"]) != own]


def test_replies_come_back_in_call_order(redis_client: redis.Redis):
    SET_ONCE.ensure_loaded(redis_client)
    replies = list(pipelined(redis_client, SET_ONCE, calls(25)))
    assert replies == [[b"set", str(i).encode()] for i in range(25)]
    assert redis_client.get("t:{q}:count") == b"25"


def test_calls_are_sent_before_earlier_replies_are_read(redis_client: redis.Redis):
    SET_ONCE.ensure_loaded(redis_client)
    seen: list[object] = []

    def peek() -> None:  # building call 2: call 1 was sent and its reply not read yet
        seen.append(redis_client.get("t:{q}:item:1"))

    replies = pipelined(redis_client, SET_ONCE, calls(4, between={2: peek}), depth=2)
    first = next(replies)  # call 1 goes out before reply 0 is read
    assert first == [b"set", b"0"]
    rest = list(replies)
    assert len(rest) == 3
    assert seen == [b"1"]  # Redis had applied call 1 while Python built call 2


def test_a_lost_script_cache_is_reloaded_and_the_calls_resent(redis_client: redis.Redis):
    redis_client.script_flush()  # as after a Redis restart: every pipelined call gets NOSCRIPT
    replies = list(pipelined(redis_client, SET_ONCE, calls(6)))
    assert replies == [[b"set", str(i).encode()] for i in range(6)]
    assert redis_client.get("t:{q}:count") == b"6"


@pytest.mark.parametrize(
    "kill_at",
    [
        5,  # mid-stream: a later send fails (EPIPE), the calls on the dead connection are resent
        9,  # while building the last call: its send still succeeds, reading its reply fails
    ],
)
def test_a_connection_killed_mid_stream_loses_nothing_and_applies_nothing_twice(
    redis_client: redis.Redis, kill_at: int
):
    SET_ONCE.ensure_loaded(redis_client)
    other = redis.Redis(
        connection_pool=redis.ConnectionPool.from_url(redis_client_url(redis_client))
    )
    killed: list[int] = []

    def kill() -> None:
        for cid in connections_of(redis_client):
            redis_client.client_kill_filter(_id=str(cid))
            killed.append(cid)

    replies = list(pipelined(other, SET_ONCE, calls(10, between={kill_at: kill})))
    assert killed, "the pipelined connection was not found"
    assert [reply[1] for reply in replies] == [str(i).encode() for i in range(10)]
    # Calls whose replies were lost with the connection were made again: they
    # report "exists" when the first send had been applied, never a second set.
    assert {reply[0] for reply in replies} <= {b"set", b"exists"}
    assert redis_client.get("t:{q}:count") == b"10"
    assert all(redis_client.exists(f"t:{{q}}:item:{i}") for i in range(10))
    other.close()


def test_an_error_reply_is_raised_and_the_connection_is_not_reused_out_of_step(
    redis_client: redis.Redis,
):
    bad = LuaScript("test_bad", "return redis.error_reply('ERR nope ' .. ARGV[1])")
    bad.ensure_loaded(redis_client)
    with pytest.raises(redis.ResponseError, match="nope 0"):
        list(pipelined(redis_client, bad, calls(3)))
    SET_ONCE.ensure_loaded(redis_client)
    # The pool's connections answer their own calls, not replies left over from above.
    assert redis_client.ping() is True
    assert list(pipelined(redis_client, SET_ONCE, calls(2))) == [[b"set", b"0"], [b"set", b"1"]]


def test_depth_must_be_positive(redis_client: redis.Redis):
    with pytest.raises(ValueError, match="depth must be >= 1"):
        next(pipelined(redis_client, SET_ONCE, calls(1), depth=0))


def redis_client_url(client: redis.Redis) -> str:
    kwargs = client.connection_pool.connection_kwargs
    return f"redis://{kwargs['host']}:{kwargs['port']}/{kwargs.get('db', 0)}"
