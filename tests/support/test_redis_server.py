"""Tests for the test harness itself: the private redis-server and wait_until."""

import os
import signal
import socket
import time

import pytest
import redis
from pytest_django.fixtures import Settings as SettingsFixture

from tests.support import redis_server as redis_server_module
from tests.support.redis_server import NO_RETRY, RedisServer, RedisServerError
from tests.support.waiting import wait_until


def test_session_server_answers_ping(redis_server: RedisServer, redis_client: redis.Redis) -> None:
    assert redis_client.ping() is True
    assert redis_server.port != 6379
    assert redis_server.url == f"redis://127.0.0.1:{redis_server.port}/0"


def test_fixture_points_settings_and_env_at_the_server(
    redis_server: RedisServer, settings: SettingsFixture
) -> None:
    assert settings.RQUEUE["REDIS_URL"] == redis_server.url
    assert os.environ["RQUEUE_TEST_REDIS_URL"] == redis_server.url


def test_database_is_flushed_between_tests_part1(redis_client: redis.Redis) -> None:
    redis_client.set("rqueue-harness:leftover", b"1")


def test_database_is_flushed_between_tests_part2(redis_client: redis.Redis) -> None:
    assert redis_client.dbsize() == 0


def test_server_is_private_and_persists_nothing(redis_client: redis.Redis) -> None:
    config = redis_client.config_get("*")
    assert config["bind"] == "127.0.0.1"
    assert config["save"] == ""
    assert config["appendonly"] == "no"


def test_kill9_then_restart_keeps_port_and_argv() -> None:
    with RedisServer(["--maxmemory", "10mb"]) as server:
        port, old_pid = server.port, server.pid
        client = server.client(retry=NO_RETRY)
        assert client.ping()

        server.kill9()
        assert not server.is_alive()
        with pytest.raises(redis.ConnectionError):
            client.ping()

        server.restart()
        assert server.port == port
        assert server.pid != old_pid
        assert client.ping()  # the client reconnects to the same port
        assert client.config_get("maxmemory")["maxmemory"] == str(10 * 1024 * 1024)
        client.close()
    assert not server.is_alive()
    assert not server.dir.exists()


def test_stop_is_graceful_and_idempotent() -> None:
    server = RedisServer().start()
    pid = server.pid
    server.stop()
    server.stop()
    assert not server.is_alive()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    server.close()


def test_start_retries_when_the_port_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    blocker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    blocker.bind(("127.0.0.1", 0))
    blocker.listen(1)
    taken = blocker.getsockname()[1]
    ports = iter([taken])
    real_free_port = redis_server_module.free_port
    monkeypatch.setattr(
        redis_server_module, "free_port", lambda: next(ports, 0) or real_free_port()
    )
    try:
        with RedisServer() as server:
            assert server.port != taken
            assert server.ping()
    finally:
        blocker.close()


def test_bad_argument_fails_fast_with_the_server_output() -> None:
    server = RedisServer(["--no-such-option", "1"])
    started = time.monotonic()
    with pytest.raises(RedisServerError, match="no-such-option"):
        server.start()
    assert time.monotonic() - started < 5
    server.close()


def test_unexpected_death_is_healed_by_the_autouse_fixture(redis_server: RedisServer) -> None:
    # Runs last in this module on purpose: the next test's fixture must restart it.
    os.kill(redis_server.pid, signal.SIGKILL)
    wait_until(lambda: not redis_server.is_alive(), timeout=5, message="server did not die")


def test_session_server_was_restarted(redis_server: RedisServer, redis_client: redis.Redis) -> None:
    assert redis_server.is_alive()
    assert redis_client.ping()


def test_wait_until_returns_the_value_and_times_out() -> None:
    calls = iter([0, 0, "ready"])
    assert wait_until(lambda: next(calls), timeout=1, interval=0.001) == "ready"
    with pytest.raises(AssertionError, match="never true"):
        wait_until(lambda: False, timeout=0.05, message="never true")


def test_a_local_cluster_spreads_slots_over_three_masters_and_moves_one_live() -> None:
    from redis.crc import key_slot

    from tests.support.redis_cluster import LocalCluster

    with LocalCluster() as cluster:
        assert all(node.port + 10000 < 65536 for node in cluster.nodes)
        client = cluster.client()
        try:
            owners = {cluster.node_of(key_slot(f"{{q{i}}}".encode())) for i in range(30)}
            assert owners == {0, 1, 2}
            for i in range(20):
                client.set(f"{{q}}:k{i}", i)
            slot = key_slot(b"{q}")
            target = (cluster.node_of(slot) + 1) % 3
            assert cluster.move_slot(slot, target) == 20
            assert cluster.node_of(slot) == target
            assert client.get("{q}:k7") == b"7"  # the client follows MOVED
        finally:
            client.close()
