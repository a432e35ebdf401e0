"""Corrupt data planted in Redis never crashes a reader, and a worker fails a corrupt job at once.

Each corruption found by the bad-data probe is written with plain Redis commands
(as a foreign writer or a damaged restore would leave it) into a real server, then
every reader is run on it: ``get_job``, the admin (overview, job lists, job page,
failed jobs, schedules) through Django's test client, ``rqueue_info`` (and
``--check``) and ``rqueue_failed`` through ``call_command``, the Prometheus view,
and a real ``rqueue_work`` subprocess for the worker child.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from io import StringIO
from typing import Any, cast

import pytest
import redis
from django.contrib.admin.utils import quote
from django.core.management import call_command
from django.test import Client
from django.utils.html import escape
from pytest_django.fixtures import Settings as SettingsFixture

from django_rqueue import aget_job, get_job
from django_rqueue.conf import get_config
from django_rqueue.engine.keys import QueueKeys, restart_key, worker_key, workers_key
from django_rqueue.job import Job
from django_rqueue.master.heartbeat import publish
from django_rqueue.ops.workers import WorkerInfo, list_workers
from django_rqueue.record import MAX_TIMEOUT
from tests.jobs_app.jobs import fault_noop
from tests.support.jobs_in_state import Jobs

from .harness import Faults

BASE = "/admin/django_rqueue/dashboard/"
DEEP = "[" * 100_000 + "]" * 100_000

type Corrupt = Callable[[redis.Redis, str], None]


def keys() -> QueueKeys:
    return QueueKeys.of(get_config().key_prefix, "default")


def hset(**fields: str | bytes | int) -> Corrupt:
    def corrupt(client: redis.Redis, job_id: str) -> None:
        client.hset(keys().job(job_id), mapping=cast(Any, fields))  # redis-py's key type

    return corrupt


def hdel(*names: str) -> Corrupt:
    def corrupt(client: redis.Redis, job_id: str) -> None:
        client.hdel(keys().job(job_id), *names)

    return corrupt


def odd_field_name(client: redis.Redis, job_id: str) -> None:
    client.hset(keys().job(job_id), b"\xff\xfe", "x")


def not_a_hash(client: redis.Redis, job_id: str) -> None:
    client.delete(keys().job(job_id))
    client.set(keys().job(job_id), "x")


#: name -> (how to corrupt the job hash, what ``Job.problems`` then says; "" for nothing)
RECORDS: dict[str, tuple[Corrupt, str]] = {
    "deep payload": (hset(p=DEEP), "undecodable payload: JSON nested deeper than 128"),
    "deep result": (hset(result=DEEP), "undecodable result: JSON nested deeper than 128"),
    "deep error": (hset(**{"err:1": DEEP, "error": DEEP}), "undecodable error record"),
    "huge nerr": (hset(nerr=10**9), ""),
    "huge timeout": (hset(tmo=10**300), ""),
    "numbers that are not": (
        hset(attempts="abc", max="x", prio="1e999", token="t", started_at="soon"),
        "field 'attempts' is not a number: 'abc'",
    ),
    "max not a number": (hset(max="x"), "field 'max' is not a number: 'x'"),
    "missing fields": (hdel("n", "p", "s"), "no job name"),
    "not utf-8": (hset(p=b'["\xff\xfe"]', n=b"\xff"), "undecodable payload"),
    "field name not utf-8": (odd_field_name, ""),
    "bad tagged value": (
        hset(p='[{"__rqueue__":"decimal","v":"abc"}]'),
        "undecodable payload: undecodable decimal 'abc'",
    ),
    "not a hash": (not_a_hash, "unreadable record: WRONGTYPE"),
}


def job_url(job_id: str) -> str:
    return f"{BASE}jobs/{quote(job_id)}/"


def out_of(command: str, *args: str) -> str:
    out = StringIO()
    call_command(command, *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def check(*args: str) -> tuple[int, str]:  # exit status, output
    out = StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("rqueue_info", "--check", *args, stdout=out, stderr=StringIO())
    code = exited.value.code
    assert isinstance(code, int)
    return code, out.getvalue()


# -- job records ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", list(RECORDS))
def test_get_job_reads_a_corrupt_record_and_says_what_is_wrong(
    jobs: Jobs, rqueue_redis: redis.Redis, case: str
) -> None:
    corrupt, problem = RECORDS[case]
    job_id = jobs.failed()
    corrupt(rqueue_redis, job_id)

    started = time.monotonic()
    job = get_job(job_id)
    took = time.monotonic() - started

    assert job is not None
    assert took < 1.0, f"reading the record took {took:.2f} s"
    if problem:
        assert job.corrupt
        assert any(problem in p for p in job.problems), job.problems
    if case == "huge nerr":
        assert len(job.errors) == 1  # the one error the record holds
    if case == "huge timeout":
        assert job.timeout == MAX_TIMEOUT


def test_aget_job_reads_a_record_that_is_not_a_hash(jobs: Jobs, rqueue_redis: redis.Redis) -> None:
    job_id = jobs.failed()
    not_a_hash(rqueue_redis, job_id)
    job = asyncio.run(aget_job(job_id))
    assert job is not None and job.corrupt
    assert job.problems[0].startswith("unreadable record: WRONGTYPE")


@pytest.mark.parametrize("case", list(RECORDS))
def test_the_admin_shows_a_corrupt_record(
    jobs: Jobs, rqueue_redis: redis.Redis, admin_client: Client, case: str
) -> None:
    corrupt, problem = RECORDS[case]
    failed, queued = jobs.failed(), jobs.queued()
    healthy = jobs.queued()
    corrupt(rqueue_redis, failed)
    corrupt(rqueue_redis, queued)

    for url in (
        BASE,
        f"{BASE}queues/default/queued/",
        f"{BASE}queues/default/failed/",
        f"{BASE}queues/default/failed/?name=tests.jobs_app.jobs.record",
        f"{BASE}failed/",
        job_url(failed),
        job_url(queued),
    ):
        response = admin_client.get(url)
        assert response.status_code == 200, url
    page = admin_client.get(f"{BASE}queues/default/queued/")
    assert healthy in page.text
    if problem:
        assert escape(problem.split(":")[0]) in admin_client.get(job_url(failed)).text


@pytest.mark.parametrize("case", list(RECORDS))
def test_rqueue_failed_lists_and_shows_a_corrupt_record(
    jobs: Jobs, rqueue_redis: redis.Redis, case: str
) -> None:
    corrupt, problem = RECORDS[case]
    job_id = jobs.failed()
    corrupt(rqueue_redis, job_id)

    assert job_id in out_of("rqueue_failed", "list")
    listed = json.loads(out_of("rqueue_failed", "list", "--json"))
    assert [j["id"] for j in listed["jobs"]] == [job_id]
    shown = out_of("rqueue_failed", "show", job_id)
    if problem:
        assert f"PROBLEM: {problem.split(':')[0]}" in shown
    assert json.loads(out_of("rqueue_failed", "show", "--json", job_id))[0]["id"] == job_id


def test_rqueue_failed_list_with_empty_failed_stores() -> None:
    out = out_of("rqueue_failed", "list")
    assert "failed jobs per queue: default: 0" in out
    assert json.loads(out_of("rqueue_failed", "list", "--json"))["jobs"] == []


@pytest.mark.parametrize("cursor", ["9" * 30, str(2**63), "-5", "abc", "1e3", ""])
def test_a_filtered_list_takes_any_cursor(jobs: Jobs, admin_client: Client, cursor: str) -> None:
    job_id = jobs.failed()
    for state in ("queued", "scheduled", "running", "failed", "succeeded"):
        url = f"{BASE}queues/default/{state}/"
        response = admin_client.get(url, {"name": "tests.jobs_app.jobs.record", "cursor": cursor})
        assert response.status_code == 200, (state, response.status_code)
        if state == "failed":  # an unusable cursor shows the first page
            assert job_id in response.text


# -- the worker registry -------------------------------------------------------------------

#: name -> (how to corrupt a published worker hash, what the warning says)
REGISTRY: dict[str, tuple[Callable[[redis.Redis, str], object], str]] = {
    "pid not a number": (
        lambda c, key: c.hset(key, "jobs", json.dumps([{"id": "default:x", "pid": "abc"}])),
        "pid is not an integer: 'abc'",
    ),
    "pid a list": (
        lambda c, key: c.hset(key, "jobs", json.dumps([{"id": "default:x", "pid": [1]}])),
        "pid is not an integer: '[1]'",
    ),
    "jobs not a list": (lambda c, key: c.hset(key, "jobs", "5"), "jobs is not a list: '5'"),
    "garbage json": (
        lambda c, key: c.hset(key, mapping={"jobs": DEEP, "queues": "{nope", "pid": "[1]"}),
        "jobs is not a list",
    ),
    "not a hash": (lambda c, key: (c.delete(key), c.set(key, "x")), "unreadable: WRONGTYPE"),
}


@pytest.fixture
def corrupt_worker(request: pytest.FixtureRequest, rqueue_redis: redis.Redis) -> str:
    """A healthy worker ``w-ok`` and a corrupt one ``w-bad``; returns the warning text."""
    publish(WorkerInfo(id="w-ok", queues=("default",)), ttl=60)
    publish(WorkerInfo(id="w-bad", queues=("default",)), ttl=60)
    corrupt, warning = REGISTRY[request.param]
    corrupt(rqueue_redis, worker_key(get_config().key_prefix, "w-bad"))
    return warning


@pytest.mark.parametrize("corrupt_worker", list(REGISTRY), indirect=True)
def test_every_reader_survives_a_corrupt_worker_entry(
    corrupt_worker: str, admin_client: Client, rqueue_redis: redis.Redis
) -> None:
    workers = {w.id: w for w in list_workers()}
    assert workers["w-ok"].problems == ()
    assert any(corrupt_worker in p for p in workers["w-bad"].problems)

    overview = admin_client.get(BASE)
    assert overview.status_code == 200
    assert "The registry entry of worker w-bad is corrupt" in overview.text

    info = out_of("rqueue_info")
    assert "worker w-bad: corrupt registry entry" in info
    assert json.loads(out_of("rqueue_info", "--json"))["workers"]

    code, text = check()
    assert code in (1, 2), text  # the session server runs without persistence (WARNING)
    assert "WARNING: worker w-bad: corrupt entry" in text
    assert "Traceback" not in text

    assert admin_client.get("/metrics/").status_code == 200


def test_a_registry_that_is_not_a_sorted_set_lists_no_worker(
    rqueue_redis: redis.Redis, admin_client: Client
) -> None:
    rqueue_redis.set(workers_key(get_config().key_prefix), "x")
    assert list_workers() == []
    assert admin_client.get(BASE).status_code == 200
    assert "no worker seen" in out_of("rqueue_info")


def test_a_corrupt_restart_request_is_no_request(rqueue_redis: redis.Redis) -> None:
    rqueue_redis.set(restart_key(get_config().key_prefix), "soon")
    assert publish(WorkerInfo(id="w1"), ttl=60) == 0
    rqueue_redis.delete(restart_key(get_config().key_prefix))
    rqueue_redis.sadd(restart_key(get_config().key_prefix), "x")
    assert publish(WorkerInfo(id="w1"), ttl=60) == 0


# -- schedule entries ----------------------------------------------------------------------


def test_every_reader_survives_a_corrupt_schedule_entry(
    settings: SettingsFixture, rqueue_redis: redis.Redis, admin_client: Client
) -> None:
    settings.RQUEUE = {
        **settings.RQUEUE,
        "SCHEDULE": {
            "bad": {"job": "tests.jobs_app.jobs.record", "every": 60, "args": ["/dev/null", "b"]},
            "good": {"job": "tests.jobs_app.jobs.record", "every": 60, "args": ["/dev/null", "g"]},
        },
    }
    rqueue_redis.set(keys().schedule_entry("bad"), "x")  # its state hash, of the wrong type

    page = admin_client.get(f"{BASE}schedules/")
    assert page.status_code == 200
    assert "its state in Redis is unreadable" in page.text
    assert admin_client.get(BASE).status_code == 200
    info = out_of("rqueue_info")
    assert "schedule entry 'bad' is not run: its state in Redis is unreadable" in info
    assert "'good' is not run" not in info


# -- the worker ----------------------------------------------------------------------------

#: Records a worker must fail at once as corrupt (no retry), naming the problem.
FAILED_AT_ONCE = ["deep payload", "deep result", "max not a number", "bad tagged value"]


@pytest.mark.parametrize("case", [*FAILED_AT_ONCE, "huge nerr", "huge timeout"])
def test_a_worker_fails_a_corrupt_job_at_once_and_goes_on(
    faults: Faults, rqueue_redis: redis.Redis, case: str
) -> None:
    corrupt, problem = RECORDS[case]
    victim = fault_noop.delay(faults.ledger, "victim")  # max_attempts 5
    healthy = fault_noop.delay(faults.ledger, "healthy")
    corrupt(rqueue_redis, victim.id)
    worker = faults.worker("--concurrency", "1", "--without-poller", lease=2, grace=1)
    faults.wait_ready(worker)

    faults.wait_final([victim.id, healthy.id], timeout=30)

    assert get_job(healthy.id) is not None and faults.state(healthy.id) == "succeeded"
    job = get_job(victim.id)
    assert job is not None
    if case in FAILED_AT_ONCE:
        assert job.status == "failed"
        assert job.attempts == 1, "a corrupt record is not retried"
        assert job.error is not None
        assert job.error["message"].startswith("job record is corrupt: "), job.error
        assert problem in job.error["message"]
    else:
        assert job.status == "succeeded", job.error
    assert "worker process died" not in worker.stderr()
    assert "lease expired" not in worker.stderr()
    assert worker.alive()


def test_an_unreadable_record_builds_a_job_that_says_so() -> None:
    job = Job.unreadable("default:abc", "WRONGTYPE Operation against a key")
    assert job.corrupt and job.problems == ["unreadable record: WRONGTYPE Operation against a key"]
    assert job.status == "failed"


def test_an_error_count_is_bounded_by_the_fields_present() -> None:
    fields: dict[str, Any] = {"s": "failed", "n": "x", "p": "[]", "nerr": str(10**12)}
    fields["err:1"] = json.dumps({"type": "E", "message": "m", "traceback": ""})
    started = time.monotonic()
    job = Job.from_fields("default:abc", fields)
    assert time.monotonic() - started < 0.1
    assert [e["message"] for e in job.errors] == ["m"]


# -- counters ------------------------------------------------------------------------------


def test_every_reader_survives_corrupt_counters(
    jobs: Jobs, rqueue_redis: redis.Redis, admin_client: Client
) -> None:
    jobs.failed()
    huge = "9" * 5000  # more digits than int() reads
    rqueue_redis.hset(keys().stats, mapping={"queued": "abc", "trimmed": huge, "failed": "²"})
    rqueue_redis.hset(keys().throughput, mapping={"s0": huge, "m0": "x"})
    durations = {"sum:tests.x": huge, "inf:tests.x": "²", f"{huge}:tests.x": "1", "50:tests.x": "2"}
    rqueue_redis.hset(keys().durations, mapping=cast(Any, durations))

    assert admin_client.get(BASE).status_code == 200
    assert admin_client.get(f"{BASE}queues/default/failed/").status_code == 200
    assert "default" in out_of("rqueue_info")
    scrape = admin_client.get("/metrics/")
    assert scrape.status_code == 200
    assert 'rqueue_job_duration_seconds_bucket{job="tests.x",le="0.05",queue="default"} 2.0' in (
        scrape.text
    )
