"""Job headers and ``RQUEUE["MIDDLEWARE"]`` (django_rqueue.middleware, django_rqueue.headers):
the headers reach the record on every enqueue path (read back from Redis), the enqueue hooks
run in list order, the attempt wraps nest (first outermost) around sync and async attempts in
a worker, in EAGER mode and in a real ``rqueue_work``, and the system checks."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from pytest_django.fixtures import Settings as SettingsFixture

from django_rqueue import JobStatus, get_job
from django_rqueue import middleware as middleware_module
from django_rqueue.checks import check_middleware
from django_rqueue.conf import _reset, problems
from django_rqueue.engine.fields import JobFields
from django_rqueue.engine.keys import QueueKeys
from django_rqueue.headers import MAX_HEADERS_BYTES, InvalidHeaders
from django_rqueue.job import Job
from django_rqueue.periodic import runtime
from django_rqueue.testing import capture_jobs
from django_rqueue.workflows import chain
from tests.jobs_app import middleware as mw
from tests.jobs_app.jobs import (
    areport_headers,
    fail_always,
    fault_async_overrun,
    read_ledger,
    record,
    report_headers,
    sleepy_timeout,
)
from tests.jobs_app.tasks import record_task
from tests.support.inprocess import run_worker
from tests.support.processes import STARTUP, Processes, command_env
from tests.support.relay import run_until_settled

FIRST, SECOND = "tests.jobs_app.middleware.First", "tests.jobs_app.middleware.Second"


def both(name: str, queue: str = "default") -> dict[str, str]:
    """The headers First then Second give a job of ``name`` on ``queue``."""
    where = f"{name}@{queue}"
    return {"order": "12", "seen-1": where, "seen-2": where}


def stored(client: redis.Redis, job_id: str) -> dict[str, str] | None:
    """The headers field of ``job_id``'s record, decoded (``None``: the record has none)."""
    queue = job_id.partition(":")[0]
    raw = client.hget(QueueKeys.of("rqueue", queue).job(job_id), JobFields.HEADERS)
    return None if raw is None else json.loads(raw)


@pytest.fixture
def middleware(settings: SettingsFixture) -> Iterator[list[tuple[str, str, Any]]]:
    """First and Second configured; what they see (cleared before and after)."""
    mw.EVENTS.clear()
    settings.RQUEUE = {**settings.RQUEUE, "MIDDLEWARE": [FIRST, SECOND]}
    yield mw.EVENTS
    mw.EVENTS.clear()


# -- headers on every enqueue path ----------------------------------------------------------


def test_without_middleware_the_record_has_no_headers_field(
    rqueue_redis: redis.Redis, ledger: str
) -> None:
    job = record.delay(ledger, "a")
    assert stored(rqueue_redis, job.id) is None
    assert job.headers == {} and get_job(job.id).headers == {}  # type: ignore[union-attr]


def test_delay_stores_the_headers_the_hooks_add_in_list_order(
    middleware: list[Any], rqueue_redis: redis.Redis, ledger: str
) -> None:
    job = record.delay(ledger, "a")
    expected = both(record.name)
    assert stored(rqueue_redis, job.id) == expected
    assert job.headers == expected
    assert get_job(job.id).headers == expected  # type: ignore[union-attr]
    assert [e[:2] for e in middleware] == [("enqueue", "1"), ("enqueue", "2")]


def test_adelay_stores_them(middleware: list[Any], rqueue_redis: redis.Redis, ledger: str) -> None:
    job = asyncio.run(record.adelay(ledger, "a"))
    assert stored(rqueue_redis, job.id) == both(record.name)


def test_delay_many_stores_each_jobs_own_headers(
    settings: SettingsFixture, rqueue_redis: redis.Redis, ledger: str
) -> None:
    settings.RQUEUE = {
        **settings.RQUEUE,
        "MIDDLEWARE": ["tests.jobs_app.middleware.JobIdHeader"],
    }
    jobs = record.delay_many([((ledger, str(n)), {}) for n in range(7)], batch_size=3)
    assert len({j.id for j in jobs}) == 7
    for job in jobs:
        assert stored(rqueue_redis, job.id) == {"id": job.id}
        assert get_job(job.id).status is JobStatus.QUEUED  # type: ignore[union-attr]


def test_delay_many_with_equal_headers(
    middleware: list[Any], rqueue_redis: redis.Redis, ledger: str
) -> None:
    jobs = record.delay_many([((ledger, str(n)), {}) for n in range(5)], batch_size=2)
    assert [stored(rqueue_redis, j.id) for j in jobs] == [both(record.name)] * 5
    assert len(middleware) == 10  # two hooks, once per job


def test_the_tasks_backend_stores_them(
    middleware: list[Any], rqueue_redis: redis.Redis, ledger: str
) -> None:
    result = record_task.enqueue(ledger, "a")
    headers = stored(rqueue_redis, result.id)
    assert headers is not None and headers["order"] == "12"


def test_a_periodic_run_stores_them_and_the_hook_sees_its_entry(
    middleware: list[Any], settings: SettingsFixture, rqueue_redis: redis.Redis, ledger: str
) -> None:
    entry = {"job": record.name, "every": 60, "args": [ledger, "p"]}
    settings.RQUEUE = {**settings.RQUEUE, "SCHEDULE": {"ping": entry}}
    job = runtime.run_now("ping")
    assert stored(rqueue_redis, job.id) == both(record.name)
    assert middleware == [("enqueue", "1", "ping"), ("enqueue", "2", "ping")]


def test_a_failing_hook_refuses_a_delay_but_not_a_periodic_run(
    settings: SettingsFixture,
    rqueue_redis: redis.Redis,
    ledger: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    entry = {"job": record.name, "every": 60, "args": [ledger, "p"]}
    raises = ["tests.jobs_app.middleware.Raises"]
    settings.RQUEUE = {**settings.RQUEUE, "SCHEDULE": {"ping": entry}, "MIDDLEWARE": raises}
    with pytest.raises(RuntimeError, match="middleware bug"):
        record.delay(ledger, "a")
    assert rqueue_redis.keys("rqueue:*job:*") == []
    job = runtime.run_now("ping")  # what the poller's schedule does on each tick
    assert get_job(job.id) is not None and stored(rqueue_redis, job.id) is None
    assert "periodic entry ping: a job middleware failed; run without it" in caplog.text


def test_depends_on_jobs_store_them(
    middleware: list[Any], rqueue_redis: redis.Redis, ledger: str
) -> None:
    parent = record.delay(ledger, "parent")
    child = record.using(depends_on=[parent.id]).delay(ledger, "child")
    assert child.status is JobStatus.WAITING
    assert stored(rqueue_redis, child.id) == both(record.name)
    assert child.headers == both(record.name)


@pytest.mark.usefixtures("worker_may_close_db_connections")
@pytest.mark.parametrize("outbox", [False, True], ids=["one-step", "staged"])
def test_workflow_nodes_and_callbacks_store_them(
    middleware: list[Any],
    settings: SettingsFixture,
    rqueue_redis: redis.Redis,
    ledger: str,
    outbox: bool,
) -> None:
    # WORKFLOW_FORCE_OUTBOX: created in steps and linked through the outbox (the cross-slot path).
    settings.RQUEUE = {**settings.RQUEUE, "WORKFLOW_FORCE_OUTBOX": outbox}
    workflow = (
        chain(record.si(ledger, "a"), report_headers.si(ledger, "b"))
        .on_complete(report_headers.si(ledger, "done"))
        .delay()
    )
    for node_id in workflow.node_ids:
        assert stored(rqueue_redis, node_id) == both(workflow_name(node_id, rqueue_redis))
    run_until_settled(("default",))  # worker bursts, each followed by a relay of the outbox
    runs = {e["tag"]: e for e in read_ledger(ledger) if e["event"] == "run"}
    assert runs["b"]["headers"] == both(report_headers.name)
    assert runs["done"]["headers"] == both(report_headers.name)  # the callback's


def workflow_name(job_id: str, client: redis.Redis) -> str:
    raw = client.hget(QueueKeys.of("rqueue", "default").job(job_id), JobFields.NAME)
    assert raw is not None
    return raw.decode() if isinstance(raw, bytes) else raw


def test_capture_jobs_carries_them(middleware: list[Any], ledger: str) -> None:
    with capture_jobs() as captured:
        record.delay(ledger, "a")
    assert captured[0].job.headers == both(record.name)


def test_eager_jobs_carry_them_and_run_inside_the_wraps(
    middleware: list[Any], settings: SettingsFixture, ledger: str
) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "EAGER": True}
    job = report_headers.delay(ledger, "a")
    assert job.status is JobStatus.SUCCEEDED and job.result == both(report_headers.name)
    [run] = read_ledger(ledger)
    assert run["open"] == ["1", "2"]
    assert [e[:2] for e in middleware[2:]] == [
        ("enter", "1"),
        ("enter", "2"),
        ("exit", "2"),
        ("exit", "1"),
    ]

    mw.EVENTS.clear()
    done = asyncio.run(areport_headers.adelay(ledger, "b"))
    assert done.result == both(areport_headers.name)
    assert [e[:2] for e in middleware[2:]] == [
        ("enter", "1"),
        ("enter", "2"),
        ("exit", "2"),
        ("exit", "1"),
    ]


# -- installed from code ---------------------------------------------------------------------


@pytest.fixture
def installing(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``middleware.install()`` allowed; what it installed is gone after the test."""
    monkeypatch.setattr(middleware_module, "_installed", ())
    yield
    monkeypatch.undo()
    middleware_module.load.cache_clear()
    _reset(setting="RQUEUE")


@pytest.mark.usefixtures("installing", "worker_may_close_db_connections")
def test_an_installed_instance_runs_ahead_of_the_configured_ones(
    settings: SettingsFixture, rqueue_redis: redis.Redis, ledger: str
) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "MIDDLEWARE": [FIRST]}
    mw.EVENTS.clear()
    record.delay(ledger, "planned before the install")  # a cached plan is not kept
    middleware_module.install(mw.Second())
    middleware_module.install(mw.Second())  # once per class
    job = report_headers.delay(ledger, "a")
    assert stored(rqueue_redis, job.id) == {
        "order": "21",
        "seen-1": f"{report_headers.name}@default",
        "seen-2": f"{report_headers.name}@default",
    }
    mw.EVENTS.clear()
    run_worker(burst=True)
    runs = {e["tag"]: e for e in read_ledger(ledger) if "open" in e}
    assert runs["a"]["open"] == ["2", "1"]
    assert [e[:2] for e in mw.EVENTS if e[1] == "2"] == [("enter", "2"), ("exit", "2")] * 2


@pytest.mark.usefixtures("installing")
@pytest.mark.parametrize("target", [mw.First, mw.NoHooks(), object()])
def test_install_refuses_a_class_or_an_instance_without_hooks(target: object) -> None:
    with pytest.raises(TypeError, match="needs an instance defining"):
        middleware_module.install(target)
    assert middleware_module.chain() is middleware_module.EMPTY


# -- validation ----------------------------------------------------------------------------


def test_headers_that_are_not_text_are_refused_and_nothing_is_written(
    settings: SettingsFixture, rqueue_redis: redis.Redis, ledger: str
) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "MIDDLEWARE": ["tests.jobs_app.middleware.BadValue"]}
    with pytest.raises(InvalidHeaders, match="header 'n' of .*record must be a str, got int 1"):
        record.delay(ledger, "a")
    with pytest.raises(InvalidHeaders, match="must be a str"):
        record.delay_many([((ledger, "b"), {})])
    assert rqueue_redis.keys("rqueue:*job:*") == []


def test_headers_above_the_bound_are_refused(
    settings: SettingsFixture, rqueue_redis: redis.Redis, ledger: str
) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "MIDDLEWARE": ["tests.jobs_app.middleware.TooLarge"]}
    with pytest.raises(InvalidHeaders, match=f"more than {MAX_HEADERS_BYTES}"):
        record.delay(ledger, "a")
    assert rqueue_redis.keys("rqueue:*job:*") == []


def test_a_corrupt_headers_field_is_a_problem_of_the_record(
    rqueue_redis: redis.Redis, ledger: str
) -> None:
    job = record.delay(ledger, "a")
    rqueue_redis.hset(QueueKeys.of("rqueue", "default").job(job.id), JobFields.HEADERS, '{"a": 1}')
    read = get_job(job.id)
    assert read is not None and read.headers == {}
    assert read.problems == ["undecodable headers: not an object of text values"]


# -- attempt wraps in a worker -------------------------------------------------------------


@pytest.mark.usefixtures("worker_may_close_db_connections")
def test_wraps_nest_first_outermost_around_sync_and_async_attempts(
    middleware: list[Any], ledger: str
) -> None:
    sync_job = report_headers.delay(ledger, "sync")
    async_job = areport_headers.delay(ledger, "async")
    mw.EVENTS.clear()
    run_worker(burst=True)
    runs = {e["tag"]: e for e in read_ledger(ledger)}
    assert runs["sync"]["open"] == ["1", "2"] and runs["async"]["open"] == ["1", "2"]
    assert runs["async"]["headers"] == both(areport_headers.name)
    nested = [("enter", "1", 1), ("enter", "2", 1), ("exit", "2", None), ("exit", "1", None)]
    assert middleware == nested * 2
    for job in (sync_job, async_job):
        job.refresh()
        assert job.status is JobStatus.SUCCEEDED


@pytest.mark.usefixtures("worker_may_close_db_connections")
def test_the_wraps_see_the_jobs_exception_before_the_worker_records_it(
    middleware: list[Any], ledger: str
) -> None:
    job = fail_always.using(max_attempts=1).delay(ledger, "x")
    mw.EVENTS.clear()
    run_worker(burst=True)
    exits = [e for e in middleware if e[0] == "exit"]
    assert [e[1] for e in exits] == ["2", "1"]
    assert all(e[2] is not None and e[2].startswith("RuntimeError") for e in exits), exits
    job.refresh()
    assert job.status is JobStatus.FAILED and job.error is not None
    assert job.error["type"].endswith("RuntimeError")


@pytest.mark.usefixtures("worker_may_close_db_connections")
def test_the_wraps_see_a_soft_timeout_as_job_timeout_sync_and_async(
    middleware: list[Any], ledger: str
) -> None:
    jobs: list[Job[Any]] = [
        sleepy_timeout.delay(ledger, "sync", 5),
        fault_async_overrun.delay(ledger, "async", 5),
    ]
    mw.EVENTS.clear()
    run_worker(burst=True)
    exits = [e for e in middleware if e[0] == "exit"]
    assert len(exits) == 4, exits
    assert all(e[2].startswith("JobTimeout: job exceeded") for e in exits), exits
    for job in jobs:
        job.refresh()
        assert job.status is JobStatus.FAILED and job.error is not None
        assert job.error["type"].endswith("JobTimeout")


@pytest.mark.usefixtures("worker_may_close_db_connections")
def test_a_wrap_that_suppresses_the_exception_does_not_make_the_attempt_succeed(
    settings: SettingsFixture, ledger: str
) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "MIDDLEWARE": ["tests.jobs_app.middleware.Suppresses"]}
    job = fail_always.using(max_attempts=1).delay(ledger, "x")
    run_worker(burst=True)
    job.refresh()
    assert job.status is JobStatus.FAILED


def test_a_real_rqueue_work_runs_the_middleware(tmp_path: Path, ledger: str) -> None:
    seen = tmp_path / "middleware.jsonl"
    env = command_env(
        extra={
            "RQUEUE_TEST_MIDDLEWARE": json.dumps([FIRST, SECOND]),
            "RQUEUE_TEST_MIDDLEWARE_LEDGER": str(seen),
        }
    )
    # Enqueued here without middleware: the worker's wraps still run (headers: none).
    job = report_headers.delay(ledger, "a")
    processes = Processes(tmp_path / "commands")
    try:
        worker = processes.start("rqueue_work", "--burst", "--concurrency", "1", env=env)
        assert worker.wait(STARTUP) == 0, processes.reports()
    finally:
        processes.kill_all()
    events = [(e["event"], e["tag"], e["detail"]) for e in read_ledger(seen)]
    assert events == [
        ("enter", "1", 1),
        ("enter", "2", 1),
        ("exit", "2", None),
        ("exit", "1", None),
    ]
    [run] = read_ledger(ledger)
    assert run["open"] == ["1", "2"]
    job.refresh()
    assert job.status is JobStatus.SUCCEEDED


# -- system checks -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "check_id"),
    [
        ("tests.jobs_app.middleware.First", "rqueue.E140"),
        ([1], "rqueue.E140"),
        (["tests.jobs_app.middleware.Missing"], "rqueue.E141"),
        (["no_such_module.Middleware"], "rqueue.E141"),
        (["tests.jobs_app.middleware.not_a_class"], "rqueue.E142"),
        (["tests.jobs_app.middleware.NoHooks"], "rqueue.E142"),
    ],
)
def test_the_checks_name_what_is_wrong(
    settings: SettingsFixture, value: object, check_id: str
) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "MIDDLEWARE": value}
    found = [m for m in [*problems(settings.RQUEUE), *check_middleware()] if m.id == check_id]
    assert len(found) == 1, found
    assert "MIDDLEWARE" in found[0].msg


def test_good_middleware_passes_the_checks(settings: SettingsFixture) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "MIDDLEWARE": [FIRST, SECOND]}
    assert [*problems(settings.RQUEUE), *check_middleware()] == []
