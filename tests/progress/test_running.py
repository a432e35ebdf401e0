"""``rqueue_info`` lists the jobs the live workers run with their progress (``ops/running.py``)."""

from __future__ import annotations

import json
from io import StringIO

import redis
from django.core.management import call_command

from django_rqueue import JobContext, get_job
from django_rqueue.master.heartbeat import publish
from django_rqueue.ops.running import running_jobs
from django_rqueue.ops.workers import WorkerInfo, WorkerJob, list_workers
from tests.support.inprocess import keys
from tests.support.jobs_in_state import Jobs


def run(*args: str) -> str:
    out = StringIO()
    call_command("rqueue_info", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def reporting(jobs: Jobs, current: int, total: int, message: str) -> str:
    job = get_job(jobs.running())
    assert job is not None
    JobContext(job=job, attempt=1).set_progress(current, total, message)
    return job.id


def test_info_lists_running_jobs_with_their_progress(rqueue_redis: redis.Redis) -> None:
    jobs = Jobs(rqueue_redis)
    first = reporting(jobs, 3, 12, "resizing")
    second = jobs.running()  # no progress reported
    running = (WorkerJob(first, "default", 11), WorkerJob(second, "default", 12))
    publish(WorkerInfo(id="web-1:7:abc", host="web-1", pid=7, jobs=running), ttl=30)
    out = run()
    lines = out.splitlines()
    header = lines.index(next(line for line in lines if line.startswith("RUNNING JOB")))
    assert lines[header].split()[2:] == ["NAME", "WORKER", "PROGRESS", "UPDATED"]
    row = lines[header + 1]
    assert row.startswith(first) and "3 / 12 (25%) · resizing" in row and "web-1:7:abc" in row
    assert lines[header + 2].startswith(second) and " - " in lines[header + 2]
    data = json.loads(run("--json"))
    assert [j["id"] for j in data["running"]] == [first, second]
    assert data["running"][0]["progress"]["current"] == 3
    assert data["running"][0]["name"] == "tests.jobs_app.jobs.record"
    assert data["running"][1]["progress"] is None and data["running_more"] == 0


def test_without_running_jobs_there_is_no_running_table(rqueue_redis: redis.Redis) -> None:
    publish(WorkerInfo(id="web-1:7:abc", host="web-1", pid=7), ttl=30)
    assert "RUNNING JOB" not in run()


def test_the_list_is_bounded_and_a_corrupt_record_is_listed_without_progress(
    rqueue_redis: redis.Redis,
) -> None:
    jobs = Jobs(rqueue_redis)
    ids = [reporting(jobs, n, 10, "") for n in (1, 2)]
    rqueue_redis.delete(keys().job(ids[0]))
    rqueue_redis.set(keys().job(ids[0]), "not a hash")
    running = tuple(WorkerJob(i, "default") for i in [*ids, "default:AAAAAAAAAAAAAAAAAAAAAA"])
    publish(WorkerInfo(id="w:1:a", jobs=running), ttl=30)
    shown, more = running_jobs(list_workers(), limit=2)
    assert [j.id for j in shown] == ids and more == 1
    assert (shown[0].name, shown[0].progress) == ("", None)
    assert shown[1].progress is not None and str(shown[1].progress) == "2 / 10 (20%)"
    out = run()
    assert "... and" not in out  # rqueue_info's own limit is 50
