"""django_rqueue.engine.pipelining on a real redis-server.

``pipelined()``: script calls kept two deep in flight. The script used for it
is idempotent the way ``enqueue_batch.lua`` is: it sets a key only when absent
and counts the sets, so a resent call shows as a counter that did not move,
and a lost call as a key that is missing.

``AckStream``: acks written without waiting, replies read later, unknown ones
resendable.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from redis.crc import key_slot

from django_rqueue import LeaseLost
from django_rqueue.engine.connection import get_client
from django_rqueue.engine.keys import QueueKeys
from django_rqueue.engine.pipelining import AckStream, Call, PendingAck, pipelined
from django_rqueue.engine.replies import items
from django_rqueue.engine.scripts import LuaScript, load
from tests.support import transitions
from tests.support.jobs_in_state import enqueue_raw
from tests.support.redis_cluster import LocalCluster

# -- pipelined() ----------------------------------------------------------------

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

    replies = [items(r) for r in pipelined(other, SET_ONCE, calls(10, between={kill_at: kill}))]
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


# -- AckStream ------------------------------------------------------------------

KEYS = QueueKeys.of("rqueue", "default")


def _running(client: redis.Redis, n: int) -> list[tuple[str, int]]:
    """Enqueue and reserve ``n`` jobs; return their ``(id, token)``."""
    for _ in range(n):
        enqueue_raw("tests.noop", '{"a":[],"k":{}}')
    got = transitions.reserve_many(client, KEYS, lease_ms=60_000, worker_id="w", count=n)
    return [(job_id, int(fields[b"token"])) for job_id, fields in got.jobs]


def _ack(job_id: str, token: int) -> PendingAck:
    return PendingAck("default", KEYS, job_id, token, '"done"', 600)


def _state(client: redis.Redis, job_id: str) -> bytes | None:
    return client.hget(KEYS.job(job_id), "s")  # type: ignore[return-value]


def test_acks_apply_before_their_replies_are_read(rqueue_redis: redis.Redis) -> None:
    load("ack").ensure_loaded(rqueue_redis)
    jobs = _running(rqueue_redis, 3)
    stream = AckStream(rqueue_redis)
    for job_id, token in jobs:
        stream.send(_ack(job_id, token))
    # Nothing read yet, yet Redis has applied every ack.
    assert len(stream.pending) == 3
    assert [_state(rqueue_redis, job_id) for job_id, _ in jobs] == [b"succeeded"] * 3
    verdicts = stream.collect()
    assert [(ack.job_id, verdict) for ack, verdict in verdicts] == [(j, True) for j, _ in jobs]
    assert stream.pending == []
    stream.close()


def test_a_stale_token_is_reported_as_lease_lost_and_changes_nothing(
    rqueue_redis: redis.Redis,
) -> None:
    load("ack").ensure_loaded(rqueue_redis)
    (good, token), (other, other_token) = _running(rqueue_redis, 2)
    stream = AckStream(rqueue_redis)
    stream.send(_ack(other, other_token + 5))
    stream.send(_ack(good, token))
    (_, first), (_, second) = stream.collect()
    assert isinstance(first, LeaseLost) and "stale fencing token" in str(first)
    assert second is True
    assert _state(rqueue_redis, other) == b"running"


def test_after_script_flush_the_verdict_is_not_run_and_a_resend_applies(
    rqueue_redis: redis.Redis,
) -> None:
    ((job_id, token),) = _running(rqueue_redis, 1)
    stream = AckStream(rqueue_redis)
    rqueue_redis.script_flush()  # after the stream loaded it: Redis restarted, say
    stream.send(_ack(job_id, token))
    ((ack, verdict),) = stream.collect()
    assert verdict is False and _state(rqueue_redis, job_id) == b"running"
    transitions.ack(rqueue_redis, ack.keys, ack.job_id, ack.token, ack.result, ack.result_ttl)
    assert _state(rqueue_redis, job_id) == b"succeeded"


def test_a_stream_on_a_server_without_the_script_loads_it_before_its_first_ack(
    rqueue_redis: redis.Redis,
) -> None:
    """A fresh Redis, as a new client of this process first sees it: the acks of a batch
    are applied, not each refused with ``NOSCRIPT`` and sent again."""
    jobs = _running(rqueue_redis, 3)
    rqueue_redis.script_flush()
    pool = rqueue_redis.connection_pool
    client = redis.Redis(
        connection_pool=redis.ConnectionPool(
            connection_class=pool.connection_class, **pool.connection_kwargs
        )
    )
    stream = AckStream(client)
    for job in jobs:
        stream.send(_ack(*job))
    assert [verdict for _, verdict in stream.collect()] == [True, True, True]
    stream.close()
    client.close()


def test_a_broken_connection_leaves_the_verdicts_unknown_and_acks_are_idempotent(
    rqueue_redis: redis.Redis,
) -> None:
    load("ack").ensure_loaded(rqueue_redis)
    jobs = _running(rqueue_redis, 2)
    stream = AckStream(rqueue_redis)
    stream.send(_ack(*jobs[0]))
    rqueue_redis.client_kill_filter(skipme=True, _type="normal")  # every other client
    stream.send(_ack(*jobs[1]))
    verdicts = stream.collect()
    # The first reply may have arrived before the kill; the second cannot be known.
    assert verdicts[0][1] in (True, None) and verdicts[1][1] is None
    for ack, _ in verdicts:  # the first was applied: resending it reads as applied again
        transitions.ack(rqueue_redis, ack.keys, ack.job_id, ack.token, ack.result, ack.result_ttl)
    assert [_state(rqueue_redis, j) for j, _ in jobs] == [b"succeeded", b"succeeded"]


def test_a_due_health_check_does_not_steal_a_pending_reply(rqueue_redis: redis.Redis) -> None:
    load("ack").ensure_loaded(rqueue_redis)
    client = get_client("default")  # django-rqueue's options: health checks every 15 s
    jobs = _running(rqueue_redis, 2)
    stream = AckStream(client)
    stream.send(_ack(*jobs[0]))
    stream.wire.connection.next_health_check = 0  # as after a job that ran past the interval
    stream.send(_ack(*jobs[1]))
    assert [verdict for _, verdict in stream.collect()] == [True, True]
    stream.close()


@pytest.mark.parametrize("n", [0, 1])
def test_collect_with_nothing_owed_is_empty(rqueue_redis: redis.Redis, n: int) -> None:
    stream = AckStream(rqueue_redis)
    if n:
        load("ack").ensure_loaded(rqueue_redis)
        stream.send(_ack(*_running(rqueue_redis, 1)[0]))
        stream.collect()
    assert stream.collect() == []
    stream.close()
    stream.close()  # twice is harmless


# -- on a Redis Cluster ---------------------------------------------------------


def _elsewhere(cluster: LocalCluster, key: str) -> int:
    """A master other than the one that serves ``key`` now."""
    return (cluster.node_of(key_slot(key.encode())) + 1) % len(cluster.nodes)


def test_calls_pipelined_on_a_cluster_follow_their_slot_when_it_moves(
    redis_cluster: LocalCluster,
) -> None:
    client = get_client()
    slot = key_slot(b"t:{q}:count")
    target = _elsewhere(redis_cluster, "t:{q}:count")

    def move() -> None:
        redis_cluster.move_slot(slot, target, batch=None)

    replies = list(pipelined(client, SET_ONCE, calls(8, between={4: move})))

    assert replies == [[b"set", str(i).encode()] for i in range(8)]  # each call ran once
    assert redis_cluster.node_of(slot) == target
    assert client.get("t:{q}:count") == b"8"


def test_acks_streamed_on_a_cluster_are_resent_after_their_slot_moved(
    redis_cluster: LocalCluster,
) -> None:
    client = get_client()
    load("ack").ensure_loaded(client)  # on every master
    jobs = _running(client, 4)
    stream = AckStream(client)
    stream.send(_ack(*jobs[0]))
    stream.send(_ack(*jobs[1]))
    assert [v for _, v in stream.collect()] == [True, True]
    redis_cluster.move_slot(key_slot(KEYS.base.encode()), _elsewhere(redis_cluster, KEYS.base))
    stream.send(_ack(*jobs[2]))  # to the old master: MOVED
    stream.send(_ack(*jobs[3]))

    verdicts = stream.collect()

    assert [v for _, v in verdicts] == [None, None]  # unknown: the caller resends
    for ack, _ in verdicts:
        transitions.ack(client, KEYS, ack.job_id, ack.token, ack.result, ack.result_ttl)
    assert [_state(client, job_id) for job_id, _ in jobs] == [b"succeeded"] * 4
    stream.send(_ack(*jobs[0]))  # a fresh connection, to the new master: applied (a repeat)
    assert [v for _, v in stream.collect()] == [True]
    stream.close()
