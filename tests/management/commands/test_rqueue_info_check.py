"""``rqueue_info --check``: one line per problem, exit 0/1/2 (the Nagios convention)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from io import StringIO
from typing import Any

import pytest
import redis
from django.core.management import CommandError, call_command

from django_rqueue.engine.connection import redis_time_ms
from django_rqueue.engine.permissions import acl_rules
from django_rqueue.master.heartbeat import publish
from django_rqueue.ops.monitoring import Status
from django_rqueue.ops.workers import WorkerInfo
from django_rqueue.worker.poller import Poller
from tests.ops import dependents
from tests.support.jobs_in_state import Jobs
from tests.support.processes import command_env

from .conftest import Manage


def check(*args: str) -> tuple[int, list[str]]:
    out = StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("rqueue_info", "--check", *args, stdout=out, stderr=StringIO())
    code = exited.value.code
    assert isinstance(code, int)
    return code, out.getvalue().splitlines()


@pytest.fixture(autouse=True)
def persistent(rqueue_redis: redis.Redis) -> Iterator[None]:
    """RDB snapshots on, as in a deployment (the session server runs without persistence,
    which ``--check`` reports); the test that wants it off turns them off again."""
    before = str(rqueue_redis.config_get("save")["save"])
    rqueue_redis.config_set("save", "3600 1")
    try:
        yield
    finally:
        rqueue_redis.config_set("save", before)


@pytest.fixture
def live(rqueue_redis: redis.Redis) -> None:
    """A worker's heartbeat and a poller's round, as a running deployment leaves them."""
    publish(WorkerInfo(id="w1", queues=("default",)), ttl=60)
    Poller(["default"]).beat()


@pytest.mark.usefixtures("live")
def test_a_healthy_deployment_is_ok_with_one_line() -> None:
    code, lines = check()
    assert code == 0 and Status(code) is Status.OK
    assert lines == [lines[0]] and lines[0].startswith("RQUEUE OK: ")


def test_no_worker_and_no_poller_are_warnings(rqueue_redis: redis.Redis) -> None:
    code, lines = check()
    assert code == 1 and Status(code) is Status.WARNING
    assert lines[0] == "RQUEUE WARNING: 2 problem(s)"
    assert "WARNING: no worker seen (no live heartbeat)" in lines
    assert any(line.startswith("WARNING: no poller seen") for line in lines)


def test_a_poller_alone_still_warns_of_no_worker(rqueue_redis: redis.Redis) -> None:
    Poller(["default"]).beat()
    code, lines = check()
    assert code == 1 and lines[1:] == ["WARNING: no worker seen (no live heartbeat)"]


@pytest.mark.usefixtures("live")
def test_failed_jobs_above_max_failed(rqueue_redis: redis.Redis) -> None:
    jobs = Jobs(rqueue_redis)
    for _ in range(3):
        jobs.failed()
    assert check("--max-failed", "3")[0] == 0
    code, lines = check("--max-failed", "2")
    assert code == 1 and lines[1:] == ["WARNING: queue 'default': 3 failed jobs (> 2)"]


@pytest.mark.usefixtures("live")
def test_oldest_queued_job_above_max_age(rqueue_redis: redis.Redis) -> None:
    seconds, _ = rqueue_redis.time()
    Jobs(rqueue_redis).queued(run_at_ms=(seconds - 600) * 1000)  # due ten minutes ago
    assert check("--max-age", "3600")[0] == 0
    code, lines = check("--max-age", "300")
    assert code == 1 and len(lines) == 2
    assert lines[1].startswith("WARNING: queue 'default': the oldest queued job waited 6")
    assert lines[1].endswith("s (> 300)")


@pytest.mark.usefixtures("live")
def test_an_overdue_scheduled_job_is_a_warning(rqueue_redis: redis.Redis) -> None:
    jobs = Jobs(rqueue_redis)
    job_id = jobs.scheduled()
    seconds, _ = rqueue_redis.time()
    rqueue_redis.zadd(jobs.keys().delayed, {job_id: (seconds - 120) * 1000}, xx=True)
    code, lines = check()
    assert code == 1 and len(lines) == 2
    assert lines[1].startswith("WARNING: queue 'default': a scheduled job is 1")


@pytest.mark.usefixtures("live")
def test_an_outbox_entry_nobody_relays_is_a_warning_then_critical(
    rqueue_redis: redis.Redis,
) -> None:
    jobs = Jobs(rqueue_redis)
    now = redis_time_ms(rqueue_redis)
    dependents.outbox_entry(rqueue_redis, jobs, queue="emails", at=f"{now - 30_000}-0")
    assert check()[0] == 0  # relayed within a poller round: no problem yet

    dependents.outbox_entry(rqueue_redis, jobs, queue="low", at=f"{now - 90_000}-0")
    code, lines = check()
    assert code == 1 and len(lines) == 2
    assert lines[1].startswith("WARNING: queue 'low': the oldest outbox entry waited 9")
    assert "s (> 60): no poller relays" in lines[1]

    oldest = dependents.outbox_entry(rqueue_redis, jobs, at=f"{now - 700_000}-0")
    code, lines = check()
    assert code == 2 and len(lines) == 3
    assert lines[1].startswith("CRITICAL: queue 'default': the oldest outbox entry waited 70")
    assert "s (> 600)" in lines[1] and lines[2].startswith("WARNING: queue 'low'")

    rqueue_redis.xdel(jobs.keys().outbox, oldest)  # relayed at last
    assert check()[0] == 1


@pytest.mark.usefixtures("live")
def test_an_evicting_redis_is_critical(rqueue_redis: redis.Redis) -> None:
    rqueue_redis.config_set("maxmemory-policy", "allkeys-lru")
    try:
        code, lines = check()
    finally:
        rqueue_redis.config_set("maxmemory-policy", "noeviction")
    assert code == 2 and Status(code) is Status.CRITICAL
    assert lines[0] == "RQUEUE CRITICAL: 1 problem(s)"
    assert lines[1].startswith("CRITICAL: ") and "(rqueue.E010)" in lines[1]


@pytest.mark.usefixtures("live")
def test_no_persistence_is_the_warning_rqueue_info_prints(rqueue_redis: redis.Redis) -> None:
    rqueue_redis.config_set("save", "")
    code, lines = check()
    assert code == 1 and Status(code) is Status.WARNING
    assert lines[0] == "RQUEUE WARNING: 1 problem(s)"
    assert lines[1].startswith("WARNING: Redis at redis://127.0.0.1:")
    assert ": persistence is off" in lines[1] and "(rqueue.W010)" in lines[1]
    message = lines[1].removeprefix("WARNING: ").removesuffix(" (rqueue.W010)")
    report = StringIO()
    call_command("rqueue_info", stdout=report)
    assert f"WARNING rqueue.W010: {message}" in report.getvalue()


def test_bad_thresholds_are_command_errors(rqueue_redis: redis.Redis) -> None:
    with pytest.raises(CommandError, match="max_failed"):
        call_command("rqueue_info", "--check", "--max-failed", "-1", stdout=StringIO())
    with pytest.raises(CommandError, match="go with --check"):
        call_command("rqueue_info", "--max-age", "5", stdout=StringIO())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_redis_down_is_critical_and_exits_2_from_a_real_process(
    manage: Manage, rqueue_redis: redis.Redis
) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    process = manage("rqueue_info", "--check", env=command_env(redis_url=url))
    assert process.wait(timeout=60) == 2
    lines = process.stdout().splitlines()
    assert lines[0] == "RQUEUE CRITICAL: 1 problem(s)"
    assert lines[1].startswith("CRITICAL: ") and "unreachable" in lines[1].lower()


@pytest.mark.parametrize(
    ("changes", "status", "says"),
    [
        ((), Status.OK, ""),  # the documented user: nothing to report
        (("-client|unblock",), Status.WARNING, "rqueue.W120"),
        (("-zadd",), Status.CRITICAL, "may not run zadd (NOPERM). (rqueue.E120)"),
        (("resetkeys", "~other:*"), Status.CRITICAL, "(rqueue.E121)"),
    ],
    ids=["documented-user", "no-client-unblock", "no-zadd", "other-keys"],
)
@pytest.mark.usefixtures("live")
def test_the_users_acl_is_checked(
    rqueue_redis: redis.Redis,
    settings: Any,
    changes: tuple[str, ...],
    status: Status,
    says: str,
) -> None:
    rules = acl_rules("rqueue")
    rqueue_redis.execute_command("ACL", "SETUSER", "checked", "reset", "on", ">pw", *rules)
    if changes:
        rqueue_redis.execute_command("ACL", "SETUSER", "checked", *changes)
    host = settings.RQUEUE["REDIS_URL"].rsplit("@", 1)[-1].removeprefix("redis://")
    settings.RQUEUE = {**settings.RQUEUE, "REDIS_URL": f"redis://checked:pw@{host}"}
    try:
        code, lines = check()
    finally:
        rqueue_redis.acl_deluser("checked")

    assert code == status, lines
    assert lines[0].startswith(f"RQUEUE {status.name}: ")
    if says:
        [line] = [line for line in lines[1:] if says in line]
        assert line.startswith(f"{status.name}: Redis at redis://checked@{host}: ")
