"""``rqueue_info``: queues with counts, workers, Redis health and warnings."""

from __future__ import annotations

import json
from io import StringIO

import redis
from django.core.management import call_command

from django_rqueue.worker import heartbeat
from tests.support.jobs_in_state import Jobs


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
    assert "WARNING" in out and "no worker seen" in out
    assert "persistence is off" in out  # the test server runs without AOF/RDB


def test_info_json(rqueue_redis: redis.Redis):
    Jobs(rqueue_redis).failed()
    data = json.loads(run("--json"))
    assert data["redis"]["Redis"]["maxmemory_policy"] == "noeviction"
    by_queue = {q["queue"]: q for q in data["queues"]}
    assert by_queue["default"]["failed"] == 1
    assert by_queue["default"]["failed_last_hour"] == 1
    assert isinstance(data["workers"], list)


def test_info_lists_registered_workers(rqueue_redis: redis.Redis):
    heartbeat.publish(
        heartbeat.WorkerInfo(
            id="web-1:7:abc", host="web-1", pid=7, queues=("default",), poller=False
        ),
        ttl=30,
    )
    out = run()
    row = next(line for line in out.splitlines() if line.startswith("web-1:7:abc"))
    assert row.split()[:4] == ["web-1:7:abc", "web-1", "7", "default"]
    assert "no worker runs a poller" in out
    assert "no worker seen" not in out
