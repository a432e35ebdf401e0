"""One attempt of a sync job in an in-process worker (:mod:`django_rqueue.worker.attempt`):
what a failure outside the job's code, a soft timeout and a long run leave behind.

Jobs write to a ledger file (``tests/jobs_app/jobs.py``) so what ran is
checked independently of what Redis records.
"""

from __future__ import annotations

import time

import pytest
import redis
from pytest_django.fixtures import Settings as SettingsFixture

from django_rqueue import JobStatus, get_job
from django_rqueue.serialization import encode_arguments
from tests.jobs_app.jobs import exits, record, returns_unserializable, sleepy_timeout, slow
from tests.support.inprocess import keys, poller_thread, run_worker, tags
from tests.support.jobs_in_state import enqueue_raw

pytestmark = pytest.mark.usefixtures("worker_may_close_db_connections")


def test_unknown_job_name_goes_to_failed_store_and_worker_continues(
    ledger: str, rqueue_redis: redis.Redis
) -> None:
    unknown = enqueue_raw("no.such.job", encode_arguments([1], {}))
    after = record.delay(ledger, "after")

    run_worker(burst=True)

    job = get_job(unknown)
    assert job is not None
    assert job.status is JobStatus.FAILED
    assert job.attempts == 1  # not retried: no worker knows it
    assert job.error is not None
    assert job.error["type"] == "django_rqueue.exceptions.UnknownJob"
    assert "no.such.job" in job.error["message"]
    assert rqueue_redis.zscore(keys().failed, unknown) is not None
    assert get_job(after.id).status is JobStatus.SUCCEEDED  # type: ignore[union-attr]
    assert tags(ledger) == ["after"]


@pytest.mark.parametrize("payload", ["{not json", '{"a": 1}', "[]", b"\xff\xfe"])
def test_corrupt_payload_goes_to_failed_store_and_worker_continues(
    ledger: str, rqueue_redis: redis.Redis, payload: str | bytes
) -> None:
    bad = record.delay(ledger, "bad")
    rqueue_redis.hset(keys().job(bad.id), "p", payload)
    good = record.delay(ledger, "good")

    run_worker(burst=True)

    job = get_job(bad.id)
    assert job is not None
    assert job.status is JobStatus.FAILED
    assert job.attempts == 1  # retrying cannot repair a payload
    assert job.error is not None
    assert "payload" in job.error["message"]
    assert "corrupt" in job.error["message"]
    assert rqueue_redis.zscore(keys().failed, bad.id) is not None
    assert get_job(good.id).status is JobStatus.SUCCEEDED  # type: ignore[union-attr]
    assert tags(ledger) == ["good"]  # the corrupt job's function never ran


def test_unserializable_return_value_fails_the_attempt(ledger: str) -> None:
    enqueued = returns_unserializable.delay(ledger, "u")

    run_worker(burst=True)

    job = get_job(enqueued.id)
    assert job is not None
    assert job.status is JobStatus.FAILED
    assert job.error is not None
    assert job.error["type"] == "builtins.TypeError"
    assert "JSON" in job.error["message"] and "object" in job.error["message"]
    assert tags(ledger) == ["u"]


def test_system_exit_in_a_job_fails_the_attempt_not_the_worker(ledger: str) -> None:
    bad = exits.delay(ledger, "exit")
    good = record.delay(ledger, "good")

    run_worker(burst=True)

    job = get_job(bad.id)
    assert job is not None
    assert job.status is JobStatus.FAILED
    assert job.error is not None and job.error["type"] == "builtins.SystemExit"
    assert get_job(good.id).status is JobStatus.SUCCEEDED  # type: ignore[union-attr]


def test_job_exceeding_its_timeout_gets_job_timeout(ledger: str) -> None:
    enqueued = sleepy_timeout.delay(ledger, "t", 5)  # timeout=0.5, max_attempts=1
    after = record.delay(ledger, "after")

    started = time.monotonic()
    run_worker(burst=True)
    elapsed = time.monotonic() - started

    job = get_job(enqueued.id)
    assert job is not None
    assert job.status is JobStatus.FAILED
    assert job.error is not None
    assert job.error["type"] == "django_rqueue.exceptions.JobTimeout"
    assert "timeout" in job.error["message"]
    assert tags(ledger, "start") == ["t"]
    assert tags(ledger, "end") == []  # interrupted
    assert tags(ledger) == ["after"]
    assert get_job(after.id).status is JobStatus.SUCCEEDED  # type: ignore[union-attr]
    assert elapsed < 4, f"the job was not interrupted (took {elapsed:.1f} s)"


def test_using_timeout_overrides_the_job_timeout(ledger: str) -> None:
    enqueued = slow.using(timeout=0.3, max_attempts=1).delay(ledger, "s", 5)

    run_worker(burst=True)

    job = get_job(enqueued.id)
    assert job is not None
    assert job.status is JobStatus.FAILED
    assert job.error is not None
    assert job.error["type"] == "django_rqueue.exceptions.JobTimeout"
    assert tags(ledger, "end") == []


def test_lease_is_renewed_while_a_long_job_runs(
    ledger: str,
    settings: SettingsFixture,
    rqueue_redis: redis.Redis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "LEASE": 1}
    enqueued = slow.delay(ledger, "long", 3)  # three leases long

    with poller_thread():  # would reclaim the job if its lease were not renewed
        run_worker(burst=True)

    assert tags(ledger, "start") == ["long"]
    assert tags(ledger, "end") == ["long"]
    job = get_job(enqueued.id)
    assert job is not None
    assert job.status is JobStatus.SUCCEEDED
    assert job.attempts == 1
    assert job.errors == []
    assert not [r for r in caplog.records if "reclaimed" in r.getMessage()]
    assert rqueue_redis.zcard(keys().reserved) == 0
