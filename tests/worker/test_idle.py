"""Idle waiting across servers and cluster slots (django_rqueue.worker.idle), on real Redis."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
import redis
from pytest_django.fixtures import Settings as SettingsFixture
from redis.exceptions import NoScriptError

from django_rqueue.engine.connection import location_of, reset_clients
from django_rqueue.engine.keys import QueueKeys
from django_rqueue.engine.permissions import acl_rules
from django_rqueue.exceptions import RedisUnavailable
from django_rqueue.worker.blocking import forget_unblock_refusals
from django_rqueue.worker.idle import IdleWaiter, Woken
from tests.support import redis_acl
from tests.support.redis_cluster import LocalCluster
from tests.support.redis_commands import blocked_clients
from tests.support.redis_server import RedisServer
from tests.support.waiting import wait_until

PREFIX = "rqueue"
#: Long enough that a wake-up within it can only come from a token, not the timeout.
LONG = 4.0


def notify(queue: str) -> str:
    return QueueKeys.of(PREFIX, queue).notify


class Waiting:
    """A :meth:`IdleWaiter.wait` running in a thread: its result and when it returned."""

    def __init__(self, waiter: IdleWaiter, queues: list[str], seconds: float = LONG) -> None:
        self.cancel = threading.Event()
        self.result: bool | BaseException | None = None
        self.returned_at: float | None = None
        lists = [(q, notify(q)) for q in queues]

        def run() -> None:
            try:
                self.result = waiter.wait(lists, seconds, cancel=self.cancel)
            except BaseException as exc:  # handed to the test
                self.result = exc
            self.returned_at = time.monotonic()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def join(self) -> bool | BaseException | None:
        self.thread.join(LONG + 2)
        assert not self.thread.is_alive(), "the wait did not return"
        return self.result


@contextmanager
def waiter() -> Iterator[IdleWaiter]:
    idle = IdleWaiter()
    try:
        yield idle
    finally:
        idle.close()


def woken_by(push: Callable[[], object], waiting: Waiting) -> float:
    """Push a token; return the seconds until the wait returned."""
    pushed = time.monotonic()
    push()
    assert waiting.join() is True
    assert waiting.returned_at is not None
    return waiting.returned_at - pushed


def test_a_token_on_the_second_server_wakes_a_wait_on_both_at_once(
    rqueue_redis: redis.Redis, other_redis_server: RedisServer
) -> None:
    other = other_redis_server.client()
    with waiter() as idle:
        waiting = Waiting(idle, ["default", "emails"])
        wait_until(lambda: blocked_clients(rqueue_redis) == 1 and blocked_clients(other) == 1)

        assert woken_by(lambda: other.rpush(notify("emails"), "1"), waiting) < 0.5

        # The wait on the first server was ended (CLIENT UNBLOCK), not left to take the next token.
        assert blocked_clients(rqueue_redis) == 0
        rqueue_redis.rpush(notify("default"), "1")
        assert rqueue_redis.llen(notify("default")) == 1
        assert other.llen(notify("emails")) == 0  # the waiter took its own token


def test_a_token_taken_by_a_second_blocked_call_is_pushed_back(
    rqueue_redis: redis.Redis, other_redis_server: RedisServer
) -> None:
    other = other_redis_server.client()
    with waiter() as idle:
        waiting = Waiting(idle, ["default", "emails"])
        wait_until(lambda: blocked_clients(rqueue_redis) == 1 and blocked_clients(other) == 1)
        pipe_a, pipe_b = rqueue_redis.pipeline(), other.pipeline()
        pipe_a.rpush(notify("default"), "1")
        pipe_b.rpush(notify("emails"), "1")
        pipe_a.execute(), pipe_b.execute()  # both calls return with a token

        assert waiting.join() is True

    # One token was the waiter's; the other is back for another idle worker.
    assert rqueue_redis.llen(notify("default")) + other.llen(notify("emails")) == 1


def test_a_wait_on_queues_on_three_masters_wakes_for_each(redis_cluster: LocalCluster) -> None:
    queues = ["default", "emails", "low"]
    with redis_cluster.client() as client:
        masters = {redis_cluster.node_of(client.keyslot(notify(q))) for q in queues}
        assert len(masters) == 3  # one queue per master: one BLPOP per slot, no CROSSSLOT
        with waiter() as idle:
            for queue in queues:
                waiting = Waiting(idle, queues)
                wait_until(
                    lambda: sum(blocked_clients(n.client()) for n in redis_cluster.nodes) == 3
                )
                push = functools.partial(client.rpush, notify(queue), "1")
                assert woken_by(push, waiting) < 0.5
                wait_until(
                    lambda: sum(blocked_clients(n.client()) for n in redis_cluster.nodes) == 0
                )
        assert all(client.llen(notify(q)) == 0 for q in queues)


def test_a_server_that_is_down_is_left_out_while_the_other_wakes_the_wait(
    rqueue_redis: redis.Redis, other_redis_server: RedisServer
) -> None:
    other_redis_server.stop()
    with waiter() as idle:
        waiting = Waiting(idle, ["default", "emails"])
        wait_until(lambda: not idle.outages.usable(location_of("emails")))
        wait_until(lambda: blocked_clients(rqueue_redis) == 1)

        assert woken_by(lambda: rqueue_redis.rpush(notify("default"), "1"), waiting) < 0.5


def test_a_wait_whose_only_server_is_down_raises_redis_unavailable(
    other_redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    other_redis_server.stop()
    with waiter() as idle:
        waiting = Waiting(idle, ["emails"])
        found = waiting.join()
        assert isinstance(found, RedisUnavailable)
        assert not idle.outages.usable(location_of("emails"))
    # The error and the log line name the server, as its URL (without a password).
    user = f"{redis_acl.USER}@" if redis_acl.enabled() else ""
    server = f"Redis at redis://{user}127.0.0.1:{other_redis_server.port}/0"
    assert str(found).startswith(f"{server} is unreachable: ")
    [line] = [r.getMessage() for r in caplog.records if "is unreachable" in r.getMessage()]
    assert line.startswith(f"{server} (of {notify('emails')}) is unreachable (")


def test_interrupt_ends_a_wait_at_once(
    rqueue_redis: redis.Redis, other_redis_server: RedisServer
) -> None:
    other = other_redis_server.client()
    with waiter() as idle:
        for queues in (["default"], ["default", "emails"]):
            waiting = Waiting(idle, queues)
            wait_until(lambda: blocked_clients(rqueue_redis) == 1)
            started = time.monotonic()
            idle.interrupt(waiting.cancel)
            assert waiting.join() is False
            assert time.monotonic() - started < 0.5
            assert blocked_clients(rqueue_redis) == blocked_clients(other) == 0


class WaitingThen:
    """A :meth:`IdleWaiter.wait_then` running in a thread: its result."""

    def __init__(
        self, waiter: IdleWaiter, queues: list[str], command: list[str], seconds: float = LONG
    ) -> None:
        self.result: Woken | BaseException | None = None
        lists = [(q, notify(q)) for q in queues]

        def run() -> None:
            try:
                self.result = waiter.wait_then(lists, seconds, command)
            except BaseException as exc:  # handed to the test
                self.result = exc

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def join(self) -> Woken | BaseException | None:
        self.thread.join(LONG + 2)
        assert not self.thread.is_alive(), "the wait did not return"
        return self.result


def test_a_command_sent_behind_the_blpop_runs_once_it_returns_and_answers_with_it(
    rqueue_redis: redis.Redis,
) -> None:
    command = ["RPUSH", "rqueue:probe", "ran"]
    with waiter() as idle:
        waiting = WaitingThen(idle, ["default"], command)
        wait_until(lambda: blocked_clients(rqueue_redis) == 1)
        assert rqueue_redis.llen("rqueue:probe") == 0  # queued behind the blocked BLPOP

        rqueue_redis.rpush(notify("default"), "1")
        assert waiting.join() == Woken(woke=True, sent=True, reply=1)

        # A BLPOP that times out is followed by the command too.
        assert WaitingThen(idle, ["default"], command, 0.05).join() == Woken(False, True, 2)
    assert rqueue_redis.lrange("rqueue:probe", 0, -1) == [b"ran", b"ran"]


def test_an_error_reply_behind_the_blpop_is_returned_and_the_connection_stays_usable(
    rqueue_redis: redis.Redis,
) -> None:
    with waiter() as idle:
        woken = WaitingThen(idle, ["default"], ["EVALSHA", "0" * 40, "0"], 0.05).join()
        assert isinstance(woken, Woken) and woken.sent and not woken.woke
        assert isinstance(woken.reply, NoScriptError)

        assert WaitingThen(idle, ["default"], ["PING"], 0.05).join() == Woken(False, True, b"PONG")


def test_no_command_goes_behind_a_wait_on_several_servers(
    rqueue_redis: redis.Redis, other_redis_server: RedisServer
) -> None:
    other = other_redis_server.client()
    with waiter() as idle:
        waiting = WaitingThen(idle, ["default", "emails"], ["RPUSH", "rqueue:probe", "ran"])
        wait_until(lambda: blocked_clients(rqueue_redis) == 1 and blocked_clients(other) == 1)
        other.rpush(notify("emails"), "1")

        assert waiting.join() == Woken(woke=True, sent=False)
    assert rqueue_redis.llen("rqueue:probe") == other.llen("rqueue:probe") == 0


@pytest.fixture
def no_unblock_user(
    redis_server: RedisServer, other_redis_server: RedisServer, settings: SettingsFixture
) -> Iterator[list[redis.Redis]]:
    """``default`` and ``emails`` reached as a user of the documented rules without
    ``CLIENT UNBLOCK``; yields admin clients of both servers (ACL logs reset)."""
    admins = [redis_server.client(), other_redis_server.client()]
    for admin in admins:
        admin.execute_command(
            "ACL", "SETUSER", "nounblock", "reset", "on", ">pw", *acl_rules("rqueue")
        )
        admin.execute_command("ACL", "SETUSER", "nounblock", "-client|unblock")
        admin.acl_log_reset()
    url, other = (
        f"redis://nounblock:pw@127.0.0.1:{s.port}/0" for s in (redis_server, other_redis_server)
    )
    queues = {**settings.RQUEUE["QUEUES"], "emails": {"REDIS_URL": other}}
    settings.RQUEUE = {**settings.RQUEUE, "REDIS_URL": url, "QUEUES": queues}
    reset_clients()
    try:
        yield admins
    finally:
        reset_clients()
        forget_unblock_refusals()
        for admin in admins:
            admin.acl_deluser("nounblock")
            admin.close()


def test_a_refused_client_unblock_is_logged_once_and_later_waits_stay_prompt_without_it(
    no_unblock_user: list[redis.Redis], caplog: pytest.LogCaptureFixture
) -> None:
    admins = no_unblock_user
    took = []
    with waiter() as idle:
        for n in range(6):
            waiting = Waiting(idle, ["default", "emails"])
            wait_until(lambda: sum(blocked_clients(a) for a in admins) >= 1)
            queue, admin = [("default", admins[0]), ("emails", admins[1])][n % 2]
            took.append(woken_by(functools.partial(admin.rpush, notify(queue), "1"), waiting))

    # The wait that met the refusal gave its other call SLACK (0.5 s) to come back; later
    # ones wake within a slice of 0.1 s (Redis ends a call at its next ~0.1 s tick).
    assert took[0] < 1.0 and max(took[1:]) < 0.4, took
    warned = [r for r in caplog.records if "refused CLIENT UNBLOCK" in r.getMessage()]
    # Once per server, at its first refusal; later waits send it none.
    servers = sorted(r.getMessage().split(" refused")[0] for r in warned)
    ports = [a.connection_pool.connection_kwargs["port"] for a in admins]
    assert servers == sorted(f"Redis at redis://nounblock@127.0.0.1:{p}/0" for p in ports)
    assert all(r.levelname == "WARNING" and "late" in r.getMessage() for r in warned)
    refused = [e["count"] for a in admins for e in a.acl_log() if e["object"] == "client|unblock"]
    assert refused == [1, 1], refused
