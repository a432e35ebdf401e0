"""Script calls on a dedicated connection per thread (``engine/dedicated.py``)."""

import os
import threading

import pytest
import redis

from django_rqueue.engine.connection import get_client
from django_rqueue.engine.dedicated import _dedicated, execute
from django_rqueue.exceptions import RedisUnavailable
from django_rqueue.job import get_job
from tests.jobs_app.jobs import record
from tests.support.redis_server import RedisServer


def _connection_id(client: redis.Redis) -> int:
    return int(execute(client, "CLIENT", "ID"))


def test_one_thread_keeps_one_connection_out_of_the_pool():
    client = get_client("default")
    first = _connection_id(client)
    assert _connection_id(client) == first
    # redis-py's pool never saw it: its own commands use another connection.
    assert int(client.client_id()) != first


def test_each_thread_has_its_own_connection():
    client = get_client("default")
    ids: list[int] = []
    threads = [threading.Thread(target=lambda: ids.append(_connection_id(client))) for _ in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len({*ids, _connection_id(client)}) == 3


def test_clients_used_in_turn_each_keep_their_own_connection(redis_server: RedisServer):
    """The last pool used is found first (a shortcut on every script call): switching
    pools must not hand one client another's connection."""
    first, second = (redis.Redis.from_url(redis_server.url) for _ in "ab")
    ids = [(_connection_id(first), _connection_id(second)) for _ in range(3)]
    assert len(set(ids)) == 1 and ids[0][0] != ids[0][1]
    first.close()
    second.close()


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_makes_its_own_connection():
    client = get_client("default")
    parent = _connection_id(client)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its connection id, never return into pytest
        try:
            os.write(write, str(_connection_id(client)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = int(pipe.read() or "0")
    os.waitpid(pid, 0)
    assert child not in (0, parent)
    assert _connection_id(client) == parent  # the parent's socket was left alone


def test_a_killed_connection_is_replaced_and_the_call_resent(redis_client: redis.Redis):
    client = get_client("default")
    before = _connection_id(client)
    redis_client.client_kill_filter(_id=str(before))
    job = record.delay("ledger", "tag")  # the enqueue script goes out on the dedicated connection
    assert get_job(job.id) is not None
    assert _connection_id(client) != before


def test_an_unreachable_redis_raises_redis_unavailable(settings, redis_server: RedisServer):
    down = RedisServer().start()
    settings.RQUEUE = {**settings.RQUEUE, "REDIS_URL": down.url}
    assert record.delay("ledger", "tag").id
    down.close()
    with pytest.raises(RedisUnavailable):
        record.delay("ledger", "tag")


def test_commands_are_packed_as_redis_py_packs_them(redis_server: RedisServer):
    client = redis_server.client()
    dedicated = _dedicated(client)
    assert dedicated is not None
    args = ("EVALSHA", "abc", 2, "k1", "k\u00e9y", 0, -1, 0.1, 1e20, 12345678901234567890)
    ours = b"".join(dedicated.pack(*args))
    assert ours == b"".join(dedicated.connection.pack_command(*args))
    assert execute(client, "ECHO", "k\u00e9y") == "k\u00e9y".encode()


def test_a_connection_the_server_closed_is_replaced_even_without_retries(
    redis_server: RedisServer, redis_client: redis.Redis
):
    client = redis.Redis.from_url(redis_server.url)  # as django-redis makes them: no retries
    before = _connection_id(client)
    redis_client.client_kill_filter(_id=str(before))
    assert execute(client, "PING") in (b"PONG", True)
    assert _connection_id(client) != before


def test_meanwhile_runs_once_after_the_command_went_out(redis_client: redis.Redis):
    client = get_client("default")
    seen: list[object] = []

    def meanwhile() -> None:
        # Blocks until the command arrives: it was sent before this ran.
        seen.append(redis_client.blpop(["test:meanwhile"], timeout=5))

    assert execute(client, "RPUSH", "test:meanwhile", "x", meanwhile=meanwhile) == 1
    assert seen == [(b"test:meanwhile", b"x")]


def test_meanwhile_raising_leaves_the_connection_in_step(redis_client: redis.Redis):
    client = get_client("default")
    execute(client, "PING")

    def meanwhile() -> None:
        raise KeyError("boom")

    with pytest.raises(KeyError):
        execute(client, "ECHO", "first", meanwhile=meanwhile)
    # The first reply was never read: the next call must get its own, not that one.
    assert execute(client, "ECHO", "second") == b"second"
