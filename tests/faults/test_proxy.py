"""The :class:`~tests.faults.proxy.FaultProxy` itself, against the session Redis."""

from __future__ import annotations

import threading
import time

import pytest
import redis

from tests.support.redis_server import NO_RETRY, RedisServer
from tests.support.waiting import wait_until

from .proxy import FaultProxy


def through(proxy: FaultProxy, timeout: float = 0.5) -> redis.Redis:
    """A fail-fast client connected through the proxy."""
    return redis.Redis(
        host="127.0.0.1",
        port=proxy.port,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=NO_RETRY,
    )


def test_pass_forwards_both_ways(proxy: FaultProxy, redis_client: redis.Redis) -> None:
    client = through(proxy)
    assert client.ping()
    client.set("k", "v" * 200_000)  # larger than one recv() chunk
    assert client.get("k") == b"v" * 200_000
    assert redis_client.strlen("k") == 200_000
    assert proxy.connections() == 1
    assert proxy.stats.bytes_up > 200_000 and proxy.stats.bytes_down > 200_000
    client.close()
    wait_until(lambda: proxy.connections() == 0, timeout=2, message="closed pair not dropped")


def test_drop_replies_applies_the_write_but_the_client_times_out(
    proxy: FaultProxy, redis_client: redis.Redis
) -> None:
    client = through(proxy, timeout=0.3)
    assert client.ping()
    proxy.set_mode("drop_replies")
    with pytest.raises(redis.TimeoutError):
        client.rpush("jobs", "a")
    assert redis_client.lrange("jobs", 0, -1) == [b"a"]  # applied: only the reply was lost
    assert proxy.stats.dropped_down > 0
    proxy.set_mode("pass")
    fresh = through(proxy)
    assert fresh.llen("jobs") == 1


def test_hold_replies_applies_the_request_and_delivers_the_reply_when_released(
    proxy: FaultProxy, redis_client: redis.Redis
) -> None:
    client = through(proxy, timeout=5)
    assert client.ping()
    proxy.set_mode("hold_replies")
    result: list[object] = []
    sender = threading.Thread(target=lambda: result.append(client.incr("n")))
    sender.start()
    try:
        wait_until(lambda: redis_client.get("n") == b"1", timeout=2, message="not applied")
        # Held for a while (a bounded watch, not a sleep: the reply must not pass).
        deadline = time.monotonic() + 0.3
        while time.monotonic() < deadline:
            assert result == [] and sender.is_alive()
            time.sleep(0.02)
    finally:
        proxy.set_mode("pass")
        sender.join(timeout=5)
    assert result == [1]
    assert client.get("n") == b"1"  # applied once, the connection still in step


def test_blackhole_holds_requests_until_the_partition_heals(
    proxy: FaultProxy, redis_client: redis.Redis
) -> None:
    client = through(proxy, timeout=0.3)
    assert client.ping()
    proxy.set_mode("blackhole")
    with pytest.raises(redis.TimeoutError):
        client.rpush("jobs", "a")  # redis-py drops the connection after the timeout
    assert redis_client.llen("jobs") == 0  # nothing reached Redis
    # New connections are accepted but hang too (a half-open partition).
    with pytest.raises(redis.TimeoutError):
        through(proxy, timeout=0.3).ping()
    proxy.set_mode("pass")
    assert through(proxy).ping()


def test_blackhole_delivers_held_bytes_when_healed(
    proxy: FaultProxy, redis_client: redis.Redis
) -> None:
    client = through(proxy, timeout=5)
    assert client.ping()
    proxy.set_mode("blackhole")
    result: list[object] = []
    sender = threading.Thread(target=lambda: result.append(client.incr("n")))
    sender.start()
    try:
        # Held for a while (a bounded watch, not a sleep: the request must not pass).
        deadline = time.monotonic() + 0.3
        while time.monotonic() < deadline:
            assert redis_client.get("n") is None
            time.sleep(0.02)
    finally:
        proxy.set_mode("pass")
        sender.join(timeout=5)
    assert result == [1]


def test_cut_after_delivers_the_request_then_holds_that_connection_until_healed(
    proxy: FaultProxy, redis_client: redis.Redis
) -> None:
    cut, other = through(proxy, timeout=5), through(proxy, timeout=5)
    assert cut.ping() and other.ping()
    proxy.cut_after(b"cut-here")
    result: list[object] = []
    sender = threading.Thread(target=lambda: result.append(cut.rpush("cut-here", "a")))
    sender.start()
    try:
        wait_until(lambda: proxy.cut() == 1, timeout=2, message="the connection was not cut")
        assert redis_client.lrange("cut-here", 0, -1) == [b"a"]  # the request got through
        assert other.incr("n") == 1  # the other connection is not cut
        # Held for a while (a bounded watch, not a sleep: the reply must not pass).
        deadline = time.monotonic() + 0.3
        while time.monotonic() < deadline:
            assert result == [] and sender.is_alive()
            time.sleep(0.02)
    finally:
        proxy.heal()
        sender.join(timeout=5)
    assert result == [1]
    assert proxy.cut() == 0
    assert cut.rpush("cut-here", "b") == 2  # in step, and not cut again: the marker fired once
    assert proxy.cut() == 0


def test_refuse_resets_open_and_new_connections(proxy: FaultProxy) -> None:
    client = through(proxy)
    assert client.ping()
    proxy.set_mode("refuse")
    assert proxy.connections() == 0
    started = time.monotonic()
    with pytest.raises(redis.ConnectionError):
        client.ping()  # its connection was reset; the reconnect is refused
    with pytest.raises(redis.ConnectionError):
        through(proxy).ping()
    assert time.monotonic() - started < 1.0  # fast failures, not timeouts
    assert proxy.stats.refused >= 2
    proxy.set_mode("pass")
    assert client.ping()


def test_refuse_can_keep_open_connections(proxy: FaultProxy) -> None:
    client = through(proxy)
    assert client.ping()
    proxy.set_mode("refuse", reset=False)
    assert client.ping()
    with pytest.raises(redis.ConnectionError):
        through(proxy).ping()


def test_reset_all_resets_connections_mid_command(
    proxy: FaultProxy, redis_client: redis.Redis
) -> None:
    idle = through(proxy)
    assert idle.ping()
    busy = through(proxy, timeout=10)
    errors: list[BaseException] = []

    def block() -> None:
        try:
            busy.blpop(["never"], timeout=8)
        except redis.ConnectionError as exc:
            errors.append(exc)

    thread = threading.Thread(target=block)
    thread.start()
    wait_until(
        lambda: any("b" in c["flags"] for c in redis_client.client_list()),
        timeout=5,
        message="BLPOP not blocked in Redis",
    )
    started = time.monotonic()
    assert proxy.reset_all() == 2
    thread.join(timeout=5)
    assert errors and time.monotonic() - started < 2, "the blocked call saw no reset"
    assert "reset" in str(errors[0]).lower()
    # redis-py notices the reset of an idle pooled connection and reconnects.
    assert idle.ping()
    assert proxy.stats.reset == 2


def test_retarget_sends_new_connections_elsewhere(
    proxy: FaultProxy, redis_client: redis.Redis
) -> None:
    with RedisServer() as other:
        old = through(proxy)
        old.set("where", "first")
        proxy.retarget(other.port)
        assert old.get("where") == b"first"  # open connections keep their upstream
        new = through(proxy)
        new.set("where", "second")
        assert other.client().get("where") == b"second"
        assert redis_client.get("where") == b"first"


def test_close_stops_the_thread_and_frees_the_port(redis_server: RedisServer) -> None:
    proxy = FaultProxy(redis_server.port).start()
    client = through(proxy)
    assert client.ping()
    thread = proxy._thread  # checking the cleanup
    proxy.close()
    proxy.close()  # idempotent
    assert thread is not None and not thread.is_alive()
    with pytest.raises(redis.ConnectionError):
        through(proxy).ping()


def test_unknown_mode_is_rejected(proxy: FaultProxy) -> None:
    with pytest.raises(ValueError, match="unknown proxy mode"):
        proxy.set_mode("flaky")  # type: ignore[arg-type]
    assert proxy.mode == "pass"
