"""EAGER mode: ``.delay()`` runs the job inline through the worker's code path."""

from __future__ import annotations

import asyncio
import datetime
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from pytest_django.fixtures import Settings as SettingsFixture

from django_rqueue import Job, JobStatus, job
from django_rqueue.execution import arun_attempt
from tests.conftest import Event
from tests.jobs_app.jobs import (
    async_record,
    fail_always,
    fail_then_succeed,
    fail_with_long_backoff,
    fault_async_flaky,
    fault_async_overrun,
    read_ledger,
    record,
    returns_unserializable,
)


@pytest.fixture
def eager(settings: SettingsFixture, rqueue_redis: redis.Redis) -> Iterator[redis.Redis]:
    """Turn EAGER on; afterwards check that nothing at all was written to Redis."""
    settings.RQUEUE = {**settings.RQUEUE, "EAGER": True}
    assert rqueue_redis.dbsize() == 0
    yield rqueue_redis
    assert rqueue_redis.dbsize() == 0, rqueue_redis.keys("*")


def test_eager_delay_runs_inline_and_returns_the_finished_job(
    ledger: str, eager: redis.Redis, events: list[Event]
) -> None:
    job = record.delay(ledger, "a")

    assert isinstance(job, Job)
    assert job.status is JobStatus.SUCCEEDED
    assert job.result == "a"
    assert job.attempts == 1
    assert job.error is None and job.errors == []
    assert job.queue == "default"
    assert job.started_at is not None and job.finished_at is not None
    assert [e["tag"] for e in read_ledger(ledger)] == ["a"]  # ran before delay() returned
    assert [(name, sender) for name, sender, _ in events] == [
        ("job_enqueued", record),
        ("job_started", record),
        ("job_succeeded", record),
    ]
    assert events[-1][2]["result"] == "a"
    assert all(kw["job"] is job for _, _, kw in events)


def test_eager_ignores_delay_and_using_options_but_still_validates_them(
    ledger: str, eager: redis.Redis
) -> None:
    past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=1)
    job = record.using(delay=3600, queue="emails", priority=5, expires=past).delay(ledger, "later")

    assert job.status is JobStatus.SUCCEEDED  # runs at once: an expiry never applies
    assert job.queue == "emails"
    with pytest.raises(ValueError, match="not declared"):
        record.using(queue="nope").delay(ledger, "x")
    with pytest.raises(ValueError, match="expires"):
        record.using(expires=0).delay(ledger, "x")
    with pytest.raises(TypeError, match="tag"):
        record.delay(ledger, object())  # type: ignore[arg-type]
    assert [e["tag"] for e in read_ledger(ledger)] == ["later"]


def test_eager_retries_back_to_back_with_signals_then_fails(
    ledger: str, eager: redis.Redis, events: list[Event]
) -> None:
    started = time.monotonic()
    job = fail_with_long_backoff.delay(ledger, "x")  # a worker would wait 30 s between tries
    elapsed = time.monotonic() - started

    assert elapsed < 10, f"EAGER waited for the backoff ({elapsed:.1f} s)"
    assert job.status is JobStatus.FAILED
    assert job.attempts == 3
    assert job.result is None
    assert job.error is not None
    assert job.error["type"] == "builtins.RuntimeError"
    assert job.error["message"] == "boom x"
    assert "RuntimeError: boom x" in job.error["traceback"]
    assert [e["message"] for e in job.errors] == ["boom x"] * 3
    assert len(read_ledger(ledger)) == 3
    assert [name for name, _, _ in events] == [
        "job_enqueued",
        "job_started",
        "job_retrying",
        "job_started",
        "job_retrying",
        "job_started",
        "job_failed",
    ]
    assert all(sender is fail_with_long_backoff for _, sender, _ in events)
    for _, _, kwargs in (e for e in events if e[0] == "job_retrying"):
        assert set(kwargs) == {"job", "exception", "traceback", "delay"}
        assert kwargs["delay"] == 30.0 and type(kwargs["delay"]) is float
        assert isinstance(kwargs["exception"], RuntimeError)
        assert isinstance(kwargs["traceback"], str) and "boom x" in kwargs["traceback"]
    failed = events[-1][2]
    assert set(failed) == {"job", "exception", "traceback"}
    assert isinstance(failed["exception"], RuntimeError)


def test_eager_flaky_job_succeeds_after_retries(ledger: str, eager: redis.Redis) -> None:
    job = fail_then_succeed.delay(ledger, "f", 2)

    assert job.status is JobStatus.SUCCEEDED
    assert job.attempts == 3
    assert job.result == 3
    assert [e["type"] for e in job.errors] == ["builtins.ValueError"] * 2


def test_eager_unserializable_return_value_fails(ledger: str, eager: redis.Redis) -> None:
    job = returns_unserializable.delay(ledger, "u")

    assert job.status is JobStatus.FAILED
    assert job.error is not None
    assert job.error["type"] == "builtins.TypeError"


def test_eager_propagate_reraises_after_the_last_attempt(
    ledger: str, settings: SettingsFixture, eager: redis.Redis, events: list[Event]
) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "EAGER_PROPAGATE": True}

    with pytest.raises(RuntimeError, match="boom x"):
        fail_always.delay(ledger, "x")

    assert len(read_ledger(ledger)) == 3  # every attempt ran first
    assert [name for name, _, _ in events][-1] == "job_failed"


def test_eager_propagate_does_not_affect_success(
    ledger: str, settings: SettingsFixture, eager: redis.Redis
) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "EAGER_PROPAGATE": True}

    assert fail_then_succeed.delay(ledger, "f", 1).result == 2


def test_without_eager_delay_writes_to_redis_and_does_not_run(
    ledger: str, rqueue_redis: redis.Redis
) -> None:
    job = record.delay(ledger, "a")

    assert job.status is JobStatus.QUEUED
    assert read_ledger(ledger) == []
    assert rqueue_redis.dbsize() > 0


# -- async jobs -------------------------------------------------------------------


def test_eager_delay_of_an_async_job_runs_it_to_completion_with_asyncio_run(
    ledger: str, eager: redis.Redis, events: list[Event]
) -> None:
    job: Job[Any] = async_record.delay(ledger, "a")

    assert (job.status, job.result, job.attempts) == (JobStatus.SUCCEEDED, "a", 1)
    [run] = read_ledger(ledger)
    assert run["thread"] == threading.get_ident()
    assert [name for name, _, _ in events] == ["job_enqueued", "job_started", "job_succeeded"]


def test_eager_delay_of_an_async_job_inside_a_running_loop_runs_it_in_another_thread(
    ledger: str, eager: redis.Redis
) -> None:
    async def view() -> tuple[Job[Any], int]:
        return async_record.delay(ledger, "b"), threading.get_ident()

    job, caller = asyncio.run(view())

    assert (job.status, job.result) == (JobStatus.SUCCEEDED, "b")
    assert read_ledger(ledger)[0]["thread"] != caller  # this loop's thread cannot run it


def test_eager_adelay_awaits_an_async_job_on_the_callers_loop(
    ledger: str, eager: redis.Redis, events: list[Event]
) -> None:
    async def view() -> tuple[Job[Any], int]:
        return await async_record.adelay(ledger, "c"), threading.get_ident()

    job, caller = asyncio.run(view())

    assert (job.status, job.result) == (JobStatus.SUCCEEDED, "c")
    assert read_ledger(ledger)[0]["thread"] == caller
    assert [name for name, _, _ in events] == ["job_enqueued", "job_started", "job_succeeded"]


def test_eager_adelay_of_a_sync_job_runs_it_outside_the_loop(
    ledger: str, eager: redis.Redis
) -> None:
    job = asyncio.run(record.adelay(ledger, "d"))
    assert (job.status, job.result) == (JobStatus.SUCCEEDED, "d")


@pytest.mark.parametrize("from_async", [False, True])
def test_eager_retries_an_async_job_back_to_back_with_signals(
    ledger: str, eager: redis.Redis, events: list[Event], from_async: bool
) -> None:
    if from_async:
        job: Job[Any] = asyncio.run(fault_async_flaky.adelay(ledger, "f", 2))
    else:
        job = fault_async_flaky.delay(ledger, "f", 2)

    assert (job.status, job.attempts, job.result) == (JobStatus.SUCCEEDED, 3, 3)
    assert [e["message"] for e in job.errors] == ["flaky f attempt 1", "flaky f attempt 2"]
    assert [name for name, _, _ in events] == [
        "job_enqueued",
        *["job_started", "job_retrying"] * 2,
        "job_started",
        "job_succeeded",
    ]


def test_an_async_attempt_past_its_timeout_fails_with_job_timeout(ledger: str) -> None:
    running: Job[Any] = Job(
        id="default:x", name=fault_async_overrun.name, queue="default", status=JobStatus.RUNNING
    )
    running.args = [ledger, "t", 30]

    outcome = asyncio.run(arun_attempt(fault_async_overrun, running, timeout=0.01))

    assert outcome.error_json()  # a failure record
    assert type(outcome.exception).__name__ == "JobTimeout"
    assert str(outcome.exception) == "job exceeded its timeout of 0.01 s"
    assert "await asyncio.sleep(seconds)" in outcome.traceback  # where it was waiting
    assert [e["event"] for e in read_ledger(ledger)] == ["start"]  # cancelled at its await


def test_a_cancelled_error_of_the_jobs_own_making_is_a_failure_not_a_cancellation(
    eager: redis.Redis,
) -> None:
    failed = cancels_its_own_task.delay()

    assert failed.status is JobStatus.FAILED
    assert failed.error is not None
    assert failed.error["type"] == "asyncio.exceptions.CancelledError"


@job(max_attempts=1)
async def cancels_its_own_task() -> None:
    """Awaits a task it cancelled: the CancelledError is the job's, not the attempt's."""
    task = asyncio.ensure_future(asyncio.sleep(10))
    task.cancel()
    await task
