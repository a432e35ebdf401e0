"""``rqueue_info``: queues with counts, workers, Redis health and warnings."""

from __future__ import annotations

import json
from io import StringIO
from typing import Any

import redis
from django.core.management import call_command

from django_rqueue.engine.connection import get_client, redis_time_ms
from django_rqueue.engine.fields import StatsFields
from django_rqueue.master.heartbeat import publish
from django_rqueue.ops.operations import pause_queue
from django_rqueue.ops.workers import WorkerInfo
from tests.ops import dependents
from tests.support import transitions
from tests.support.jobs_in_state import Jobs
from tests.support.redis_cluster import LocalCluster


def run(*args: str) -> str:
    out = StringIO()
    call_command("rqueue_info", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_info_shows_counts_redis_facts_and_warnings(rqueue_redis: redis.Redis):
    jobs = Jobs(rqueue_redis)
    jobs.queued()
    jobs.failed()
    jobs.scheduled(queue="emails")
    out = run()
    assert "redis 7" in out or "redis 8" in out
    assert "policy noeviction" in out
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("QUEUE"))
    default = next(line for line in lines if line.startswith("default "))
    assert default.split()[:5] == ["default", "1", "0", "0", "1"]
    assert header.index("FAILED") <= default.rindex("1")
    # Plain column names: the last hour's successes and failures.
    assert header.split()[9:11] == ["SUCCEEDED/H", "FAILED/H"]
    assert "WARNING" in out and "no worker seen" in out
    assert "persistence is off" in out  # the test server runs without AOF/RDB


def test_info_json(rqueue_redis: redis.Redis, settings: Any):
    Jobs(rqueue_redis).failed()
    data = json.loads(run("--json"))
    url = settings.RQUEUE["REDIS_URL"]  # each server is named by its URL, without a password
    assert data["redis"][f"Redis at {url}"]["maxmemory_policy"] == "noeviction"
    by_queue = {q["queue"]: q for q in data["queues"]}
    assert by_queue["default"]["failed"] == 1
    assert by_queue["default"]["failed_last_hour"] == 1
    assert isinstance(data["workers"], list)


def test_info_shows_the_failed_jobs_deleted_by_retention(rqueue_redis: redis.Redis, settings: Any):
    queues = {**settings.RQUEUE["QUEUES"], "default": {"failed_max": 1}}
    settings.RQUEUE = {**settings.RQUEUE, "QUEUES": queues}
    jobs = Jobs(rqueue_redis)
    for _ in range(3):
        jobs.failed()
    lines = run().splitlines()
    header = next(line for line in lines if line.startswith("QUEUE"))
    default = next(line for line in lines if line.startswith("default "))
    assert header.split()[4:6] == ["FAILED", "TRIMMED"]
    assert default.split()[4:6] == ["1", "2"]
    by_queue = {q["queue"]: q for q in json.loads(run("--json"))["queues"]}
    assert (by_queue["default"]["failed"], by_queue["default"]["failed_trimmed"]) == (1, 2)
    assert (by_queue["default"]["failed_max"], by_queue["default"]["failed_ttl"]) == (1, 7_776_000)
    assert by_queue["emails"]["failed_trimmed"] == 0


def test_info_shows_the_jobs_cancelled_by_their_expiry(rqueue_redis: redis.Redis):
    jobs = Jobs(rqueue_redis)
    now_ms = rqueue_redis.time()[0] * 1000
    for _ in range(2):
        jobs.queued(expires_at_ms=now_ms - 1)
    assert transitions.reserve(rqueue_redis, jobs.keys(), lease_ms=1000, worker_id="w") is None
    lines = run().splitlines()
    header = next(line for line in lines if line.startswith("QUEUE"))
    default = next(line for line in lines if line.startswith("default "))
    assert header.split()[4:7] == ["FAILED", "TRIMMED", "EXPIRED"]
    assert default.split()[1:7] == ["0", "0", "0", "0", "0", "2"]
    by_queue = {q["queue"]: q for q in json.loads(run("--json"))["queues"]}
    assert (by_queue["default"]["expired"], by_queue["emails"]["expired"]) == (2, 0)


def test_info_lists_registered_workers(rqueue_redis: redis.Redis):
    publish(
        WorkerInfo(id="web-1:7:abc", host="web-1", pid=7, queues=("default",), poller=False),
        ttl=30,
    )
    out = run()
    row = next(line for line in out.splitlines() if line.startswith("web-1:7:abc"))
    assert row.split()[:4] == ["web-1:7:abc", "web-1", "7", "default"]
    assert "no worker runs a poller" in out
    assert "no worker seen" not in out


def test_info_lists_the_periodic_jobs(rqueue_redis: redis.Redis, settings: Any, ledger: str):
    from django_rqueue.periodic import runtime
    from django_rqueue.worker.scheduler import Scheduler

    settings.RQUEUE = {
        **settings.RQUEUE,
        "SCHEDULE": {
            "nightly": {
                "job": "tests.jobs_app.jobs.record",
                "cron": "30 2 * * *",
                "timezone": "Europe/Paris",
                "args": [ledger, "n"],
            },
            "ping": {"job": "tests.jobs_app.jobs.record", "every": 60, "args": [ledger, "p"]},
            "ghost": {"job": "no.such.job", "every": 60},
        },
    }
    Scheduler(["default"]).run_once()
    runtime.pause("nightly")
    job = runtime.run_now("ping")

    out = run()
    lines = out.splitlines()
    assert any(line.startswith("SCHEDULE") and "NEXT RUN" in line for line in lines)
    nightly = next(line for line in lines if line.startswith("nightly "))
    assert "30 2 * * * (Europe/Paris)" in nightly
    assert nightly.rstrip().endswith("yes")
    ping = next(line for line in lines if line.startswith("ping "))
    assert job.id in ping and ping.rstrip().endswith("no")
    assert "schedule entry 'ghost' is not run: no @job named 'no.such.job'" in out

    data = json.loads(run("--json"))
    by_name = {e["name"]: e for e in data["schedule"]}
    assert by_name["ping"]["last_job"] == job.id
    assert by_name["ping"]["expression"] == "every 60 s"
    assert by_name["ping"]["queue"] == "default"
    assert by_name["nightly"]["paused"] is True
    assert by_name["nightly"]["next_run"] is not None
    assert by_name["ghost"]["error"]


def test_info_without_a_schedule_has_no_schedule_table(rqueue_redis: redis.Redis):
    out = run()
    assert not any(line.startswith("SCHEDULE ") for line in out.splitlines())
    assert json.loads(run("--json"))["schedule"] == []


def test_info_shows_which_queues_are_paused(rqueue_redis: redis.Redis):
    pause_queue("emails")
    lines = run().splitlines()
    header = next(line for line in lines if line.startswith("QUEUE"))
    assert header.split()[-1] == "STATE"
    rows = {line.split()[0]: line.split()[-1] for line in lines if line.split()[:1]}
    assert (rows["emails"], rows["default"]) == ("paused", "active")
    by_queue = {q["queue"]: q for q in json.loads(run("--json"))["queues"]}
    assert by_queue["emails"]["paused"] is True and by_queue["emails"]["paused_at"]
    assert by_queue["default"]["paused"] is False and by_queue["default"]["paused_at"] is None


def test_info_shows_each_queues_rate_limit(settings: Any):
    queues = {**settings.RQUEUE["QUEUES"], "emails": {"rate_limit": "6000/m"}}
    settings.RQUEUE = {**settings.RQUEUE, "QUEUES": queues}
    lines = run().splitlines()
    header = next(line for line in lines if line.startswith("QUEUE"))
    assert header.split()[-3:] == ["RATE", "LIMIT", "STATE"]
    rows = {line.split()[0]: line.split()[-2] for line in lines if line.split()[:1]}
    assert (rows["emails"], rows["default"]) == ("6000/m", "-")
    by_queue = {q["queue"]: q for q in json.loads(run("--json"))["queues"]}
    assert (by_queue["emails"]["rate_limit"], by_queue["default"]["rate_limit"]) == ("6000/m", None)


def test_on_a_cluster_each_master_is_reported(redis_cluster: LocalCluster):
    Jobs(get_client()).queued()

    data = json.loads(run("--json"))

    assert all(name.startswith("Redis at redis://127.0.0.1:") for name in data["redis"])
    expected = {f"node 127.0.0.1:{node.port}" for node in redis_cluster.nodes}
    assert {name.rsplit(" ", 2)[1] + " " + name.rsplit(" ", 2)[2] for name in data["redis"]} == (
        expected
    )
    assert {facts["maxmemory_policy"] for facts in data["redis"].values()} == {"noeviction"}
    [default] = [q for q in data["queues"] if q["queue"] == "default"]
    assert default["queued"] == 1


def test_info_without_dependencies_has_no_dependency_table(rqueue_redis: redis.Redis):
    Jobs(rqueue_redis).queued()

    lines = run().splitlines()
    data = json.loads(run("--json"))

    assert not [line for line in lines if line.split()[:2] == ["QUEUE", "WAITING"]]
    [default] = [q for q in data["queues"] if q["queue"] == "default"]
    assert (default["waiting"], default["outbox_pending"], default["workflows_running"]) == (
        0,
        0,
        0,
    )


def test_info_shows_waiting_jobs_the_outbox_and_workflows(rqueue_redis: redis.Redis):
    jobs = Jobs(rqueue_redis)
    dependents.waiting(jobs)
    dependents.waiting(jobs)
    now = redis_time_ms(rqueue_redis)
    dependents.outbox_entry(rqueue_redis, jobs, queue="emails", at=f"{now - 95_000}-0")
    dependents.count(rqueue_redis, jobs, StatsFields.RELEASED, 4)
    dependents.count(rqueue_redis, jobs, StatsFields.DEPENDENCY_FAILED, 1)
    dependents.count(rqueue_redis, jobs, StatsFields.WORKFLOWS_STARTED, 5)
    dependents.count(rqueue_redis, jobs, StatsFields.WORKFLOWS_SUCCEEDED, 2)
    dependents.count(rqueue_redis, jobs, StatsFields.WORKFLOWS_CANCELLED, 1)

    out = run()
    data = json.loads(run("--json"))

    lines = out.splitlines()
    at = next(n for n, line in enumerate(lines) if line.split()[:2] == ["QUEUE", "WAITING"])
    end = lines.index("", at)
    header, rows = (
        lines[at].split(),
        {line.split()[0]: line.split() for line in lines[at + 1 : end]},
    )
    assert header[5:7] == ["OUTBOX", "OUTBOX-AGE"]
    assert rows["default"] == ["default", "2", "4", "1", "0", "0", "-", "2", "2", "0", "1"]
    assert rows["emails"][:6] == ["emails", "0", "0", "0", "0", "1"]
    assert rows["emails"][6].startswith("9") and rows["emails"][7] == "s"
    assert "WARNING queue 'emails': the oldest outbox entry waited 9" in out
    by_queue = {q["queue"]: q for q in data["queues"]}
    assert (by_queue["default"]["waiting"], by_queue["default"]["workflows_running"]) == (2, 2)
    assert by_queue["default"]["released_total"] == 4
    assert by_queue["emails"]["outbox_pending"] == 1
    assert 95 <= by_queue["emails"]["outbox_oldest_age"] < 150
