"""Checks of the Redis a worker is about to use (django_rqueue.ops.health), on real redis-servers.

The session server keeps no RDB/AOF, so it always draws the persistence
warning; the other problems are made on a private server or with an ACL user.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import redis
from django.core import checks
from pytest_django.fixtures import Settings as SettingsFixture

from django_rqueue.engine.connection import reset_clients
from django_rqueue.engine.permissions import acl_rules
from django_rqueue.ops.health import probe_keys, problems_for, redis_problems
from tests.faults.proxy import FaultProxy
from tests.support.redis_cluster import LocalCluster
from tests.support.redis_server import NO_RETRY, RedisServer
from tests.support.waiting import wait_until

USER = "rqueue-health-test"


@pytest.fixture(scope="module")
def evicting_server() -> Iterator[RedisServer]:
    """A private redis-server that may evict any key under memory pressure."""
    with RedisServer(["--maxmemory-policy", "allkeys-lru"]) as server:
        yield server


@pytest.fixture
def acl_user(redis_client: redis.Redis) -> Iterator[str]:
    """The name of an ACL user the test sets up on the session server; deleted after."""
    try:
        yield USER
    finally:
        redis_client.acl_deluser(USER)


def ids(problems: list[checks.CheckMessage]) -> list[str | None]:
    return [p.id for p in problems]


def test_a_server_without_persistence_draws_only_a_warning(redis_client: redis.Redis) -> None:
    problems = redis_problems(redis_client, "Redis")

    assert ids(problems) == ["rqueue.W010"]
    [warning] = problems
    assert isinstance(warning, checks.Warning) and not warning.is_serious()
    assert warning.msg.startswith("Redis: persistence is off")
    assert warning.hint is not None and "appendonly yes" in warning.hint


def test_an_evicting_maxmemory_policy_is_an_error(evicting_server: RedisServer) -> None:
    with evicting_server.client() as client:
        problems = redis_problems(client, "Redis")

    assert ids(problems) == ["rqueue.E010", "rqueue.W010"]
    error = problems[0]
    assert isinstance(error, checks.Error) and error.is_serious()
    assert "'allkeys-lru'" in error.msg
    assert error.hint is not None and "noeviction" in error.hint


@pytest.mark.parametrize(
    "persistence", [["--appendonly", "yes"], ["--save", "3600 1"]], ids=["aof", "rdb"]
)
def test_aof_or_rdb_snapshots_leave_nothing_to_report(persistence: list[str]) -> None:
    with RedisServer(persistence) as server, server.client() as client:
        assert redis_problems(client, "Redis") == []


def test_rejected_credentials_are_e011(redis_server: RedisServer) -> None:
    with redis_server.client(username="nobody", password="wrong", retry=NO_RETRY) as client:
        problems = redis_problems(client, "Redis")

    assert ids(problems) == ["rqueue.E011"]
    assert problems[0].msg.startswith("Redis rejected the credentials")
    assert problems[0].is_serious()


def test_messages_name_the_server_by_its_url_without_the_password(
    settings: SettingsFixture, redis_server: RedisServer
) -> None:
    url = f"redis://nobody:s3cret@127.0.0.1:{redis_server.port}/0"
    settings.RQUEUE = {**settings.RQUEUE, "REDIS_URL": url}
    try:
        [problem] = problems_for(["default"])
    finally:
        reset_clients()

    assert problem.id == "rqueue.E011"
    assert problem.msg.startswith(f"Redis at redis://nobody@127.0.0.1:{redis_server.port}/0 ")
    assert "s3cret" not in problem.msg


@pytest.mark.parametrize(
    ("denied", "says", "found"),
    [
        ("-info", "may not run INFO", ["rqueue.E012"]),  # nothing else can be checked
        # E120 names the script commands too; E012 says what they are for.
        ("-@scripting", "may not run Lua scripts", ["rqueue.E120", "rqueue.E012", "rqueue.W010"]),
    ],
)
def test_a_user_without_info_or_scripting_rights_is_e012(
    redis_server: RedisServer,
    redis_client: redis.Redis,
    acl_user: str,
    denied: str,
    says: str,
    found: list[str],
) -> None:
    redis_client.acl_setuser(
        acl_user,
        enabled=True,
        passwords=["+pw"],
        keys=["*"],
        channels=["*"],
        commands=["+@all", denied],
    )
    with redis_server.client(username=acl_user, password="pw", retry=NO_RETRY) as client:
        problems = redis_problems(client, "Redis")

    assert ids(problems) == found
    [e012] = [p for p in problems if p.id == "rqueue.E012"]
    assert e012.is_serious() and says in e012.msg and e012.hint is not None


def documented_user(client: redis.Redis, name: str, *changes: str) -> None:
    """(Re)create ``name`` with the rules of docs/howto/secure.md, then ``changes``."""
    client.execute_command("ACL", "SETUSER", name, "reset", "on", ">pw", *acl_rules("rqueue"))
    if changes:
        client.execute_command("ACL", "SETUSER", name, *changes)


@pytest.mark.parametrize(
    ("changes", "found", "says", "hint"),
    [
        ((), ["rqueue.W010"], "", ""),  # the documented user lacks nothing
        (("-hset", "-zadd"), ["rqueue.E120"], "may not run hset, zadd", "+hset +zadd"),
        (("resetkeys", "~other:*"), ["rqueue.E121"], "rqueue:{default}:", "~rqueue:*"),
        (("-client|unblock",), ["rqueue.W120"], "CLIENT UNBLOCK", "+client|unblock"),
    ],
    ids=["complete", "commands", "key-pattern", "client-unblock"],
)
def test_a_user_that_lacks_a_command_or_key_pattern_is_told_what_to_grant(
    redis_server: RedisServer,
    redis_client: redis.Redis,
    acl_user: str,
    changes: tuple[str, ...],
    found: list[str],
    says: str,
    hint: str,
) -> None:
    documented_user(redis_client, acl_user, *changes)
    keys = probe_keys(["default"], shared=True)
    with redis_server.client(username=acl_user, password="pw", retry=NO_RETRY) as client:
        # CONFIG GET is refused to this user: the persistence check assumes RDB snapshots.
        problems = [p for p in redis_problems(client, "Redis", keys) if p.id != "rqueue.W010"]

    assert ids(problems) == [i for i in found if i != "rqueue.W010"]
    for problem in problems:
        assert problem.msg.startswith("Redis: ") and says in problem.msg
        assert problem.hint is not None and hint in problem.hint
        assert problem.is_serious() == str(problem.id).startswith("rqueue.E")
    assert redis_client.dbsize() == 0, "the check wrote nothing"


def test_without_select_a_database_other_than_0_is_e120(
    redis_server: RedisServer, redis_client: redis.Redis, acl_user: str
) -> None:
    documented_user(redis_client, acl_user, "-select")
    with redis_server.client(db=1, username=acl_user, password="pw", retry=NO_RETRY) as client:
        [problem] = redis_problems(client, "Redis", probe_keys(["default"], shared=True))

    assert problem.id == "rqueue.E120" and "may not run select" in problem.msg


def test_an_unreachable_server_is_e013() -> None:
    server = RedisServer().start()
    client = server.client(retry=NO_RETRY)
    server.close()

    problems = redis_problems(client, "Redis")

    assert ids(problems) == ["rqueue.E013"]
    assert "Redis is unreachable" in problems[0].msg
    client.close()


def test_a_server_lost_half_way_through_the_checks_is_e013_not_an_exception(
    redis_server: RedisServer,
) -> None:
    """Redis goes away after it answered INFO (a worker starting as Redis crashes): the
    checks that follow report it unreachable, as a worker's startup gate waits on it."""
    with FaultProxy(redis_server.port) as proxy:
        client = redis.Redis.from_url(proxy.url(), retry=NO_RETRY)
        proxy.cut_after(b"EXEC")  # the first request after INFO: the ACL probe's
        found: list[object] = []
        checking = threading.Thread(target=lambda: found.append(checked(client)))
        checking.start()
        wait_until(lambda: proxy.cut() == 1, timeout=10, message="the probe was never sent")
        proxy.set_mode("refuse")  # the held connection reset; no new one accepted
        checking.join(timeout=10)
        client.close()

    [problems] = found
    assert isinstance(problems, list), problems
    assert ids(problems) == ["rqueue.E013"]


def checked(client: redis.Redis) -> list[checks.CheckMessage] | Exception:
    try:
        return redis_problems(client, "Redis")
    except Exception as exc:  # what the test reports
        return exc


def test_problems_for_checks_each_redis_once_and_names_a_queue_with_its_own(
    settings: SettingsFixture, evicting_server: RedisServer
) -> None:
    settings.RQUEUE = {
        **settings.RQUEUE,
        "QUEUES": {"default": {}, "emails": {"REDIS_URL": evicting_server.url}, "low": {}},
    }
    try:
        problems = problems_for(["default", "emails", "low"])
    finally:
        reset_clients()  # no cached client outlives the private server

    shared, own = settings.RQUEUE["REDIS_URL"], evicting_server.url
    assert [(p.id, p.msg.rsplit(": ", 1)[0]) for p in problems] == [
        ("rqueue.W010", f"Redis at {shared}"),  # default and low share the session server
        ("rqueue.E010", f"queue 'emails': Redis at {own}"),
        ("rqueue.W010", f"queue 'emails': Redis at {own}"),
    ]


def test_each_master_of_a_cluster_is_checked_and_named(redis_cluster: LocalCluster) -> None:
    evicting = redis_cluster.nodes[1]
    with evicting.client() as conn:
        conn.config_set("maxmemory-policy", "allkeys-lru")
    try:
        found = problems_for(["default"])
    finally:
        with evicting.client() as conn:
            conn.config_set("maxmemory-policy", "noeviction")

    nodes = [f"127.0.0.1:{node.port}" for node in redis_cluster.nodes]
    assert sorted(str(i) for i in ids(found)) == ["rqueue.E010"] + ["rqueue.W010"] * 3  # per master
    [evicts] = [p for p in found if p.id == "rqueue.E010"]
    assert evicts.msg.startswith("Redis at redis://") and f" node {nodes[1]}:" in evicts.msg
    for node in nodes:
        assert any(f"node {node}:" in p.msg for p in found if p.id == "rqueue.W010")
