"""``@job(takes_context=True)``, ``Retry`` and ``Reject``: in EAGER mode and in an in-process
worker against the real test redis-server (ledger files record what the jobs saw)."""

from __future__ import annotations

import datetime
from collections.abc import Iterator

import pytest
import redis
from pytest_django.fixtures import Settings as SettingsFixture

import django_rqueue
from django_rqueue import JobContext, JobStatus, Reject, Retry, RqueueError, get_job, job
from django_rqueue.dependencies import DependencyFailed
from django_rqueue.inputs import Inputs
from django_rqueue.job import Job
from tests.conftest import Event
from tests.jobs_app.jobs import read_ledger, rejects, retries_itself
from tests.support.inprocess import keys, run_worker


@pytest.fixture
def eager(settings: SettingsFixture, rqueue_redis: redis.Redis) -> Iterator[None]:
    settings.RQUEUE = {**settings.RQUEUE, "EAGER": True}
    yield
    assert rqueue_redis.dbsize() == 0


def runs(ledger: str) -> list[dict[str, object]]:
    return [e for e in read_ledger(ledger) if e["event"] == "run"]


# --- API and validation ---------------------------------------------------------------------


def test_public_names_are_exported() -> None:
    for name in ("JobContext", "Retry", "Reject"):
        assert name in django_rqueue.__all__
    assert issubclass(Retry, RqueueError) and issubclass(Reject, RqueueError)


def test_takes_context_must_be_a_bool() -> None:
    with pytest.raises(ValueError, match="takes_context"):
        job(takes_context="yes")  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="takes_context"):
        job(takes_context=1)  # type: ignore[call-overload]


def test_retry_delay_is_validated_and_accepts_a_timedelta() -> None:
    for bad in (-1, -0.001, float("nan"), float("inf"), "60", True):
        with pytest.raises(ValueError, match="Retry delay"):
            Retry(delay=bad)  # type: ignore[arg-type]
    assert Retry(delay=datetime.timedelta(minutes=2)).delay == 120.0
    assert Retry(delay=5).delay == 5.0
    assert Retry().delay is None
    assert str(Reject("no such user")) == "no such user"


def test_a_plain_call_runs_inline_with_the_context_given(ledger: str) -> None:
    fake: Job[int] = Job(
        id="default:x", name=retries_itself.name, queue="default", status=JobStatus.RUNNING
    )
    assert retries_itself(JobContext(job=fake, attempt=7), ledger, "inline", 0, None) == 7
    assert runs(ledger)[0]["attempt"] == 7


def test_delay_stores_the_arguments_after_the_context(
    ledger: str, rqueue_redis: redis.Redis
) -> None:
    queued = retries_itself.delay(ledger, "t", 0, None)
    stored = get_job(queued.id)
    assert stored is not None and (stored.args, stored.kwargs) == ([ledger, "t", 0, None], {})
    with pytest.raises(TypeError, match="'tag' \\(position 1\\)"):
        retries_itself.delay(ledger, object(), 0, None)  # type: ignore[arg-type]
    assert retries_itself.using(priority=3).takes_context


# --- EAGER --------------------------------------------------------------------------------


@pytest.mark.usefixtures("eager")
def test_eager_context_counts_attempts_across_a_retry(ledger: str, events: list[Event]) -> None:
    done = retries_itself.delay(ledger, "a", 1, 3600)  # EAGER runs the retry at once

    assert done.status is JobStatus.SUCCEEDED and done.result == 2
    assert [(e["attempt"], e["attempts"]) for e in runs(ledger)] == [(1, 1), (2, 2)]
    assert [e["id"] for e in runs(ledger)] == [done.id, done.id]
    retrying = [kw for name, _, kw in events if name == "job_retrying"]
    assert [kw["delay"] for kw in retrying] == [3600.0]


@pytest.mark.usefixtures("eager")
def test_eager_retry_with_no_attempt_left_fails_saying_so(ledger: str) -> None:
    done = retries_itself.delay(ledger, "b", 10, 0)

    assert done.status is JobStatus.FAILED and done.attempts == 3
    assert done.error is not None
    assert done.error["type"] == "django_rqueue.exceptions.Retry"
    assert "no attempt is left" in done.error["message"]
    assert [e["attempt"] for e in runs(ledger)] == [1, 2, 3]


@pytest.mark.usefixtures("eager")
def test_eager_reject_fails_at_once(ledger: str, events: list[Event]) -> None:
    done = rejects.delay(ledger, "r")

    assert done.status is JobStatus.FAILED and done.attempts == 1 and done.max_attempts == 3
    assert done.error is not None and done.error["message"] == "bad input r"
    assert [name for name, _, _ in events][-1] == "job_failed"
    assert not [name for name, _, _ in events if name == "job_retrying"]


# --- worker -------------------------------------------------------------------------------


def _score_ms(client: redis.Redis, job_id: str) -> float:
    score = client.zscore(keys().delayed, job_id)
    assert score is not None, f"{job_id} is not in the delayed zset"
    return score


def _redis_now_ms(client: redis.Redis) -> float:
    seconds, micros = client.time()
    return seconds * 1000 + micros / 1000


@pytest.mark.usefixtures("worker_may_close_db_connections")
def test_worker_retry_honours_the_delay_and_counts_the_attempt(
    ledger: str, rqueue_redis: redis.Redis, events: list[Event]
) -> None:
    queued = retries_itself.delay(ledger, "w", 1, 3600)
    run_worker(burst=True)

    after = get_job(queued.id)
    assert after is not None
    assert after.status is JobStatus.SCHEDULED and after.attempts == 1
    expected = _redis_now_ms(rqueue_redis) + 3600 * 1000
    assert abs(_score_ms(rqueue_redis, queued.id) - expected) < 5000
    assert after.run_at is not None
    assert abs(after.run_at.timestamp() * 1000 - expected) < 5000
    retrying = [kw for name, _, kw in events if name == "job_retrying"]
    assert [kw["delay"] for kw in retrying] == [3600.0]

    after.run_now()  # instead of waiting an hour
    run_worker(burst=True)

    done = get_job(queued.id)
    assert done is not None and done.status is JobStatus.SUCCEEDED and done.result == 2
    assert [(e["attempt"], e["attempts"]) for e in runs(ledger)] == [(1, 1), (2, 2)]


@pytest.mark.usefixtures("worker_may_close_db_connections")
def test_worker_retry_without_delay_uses_the_backoff_policy(
    ledger: str, rqueue_redis: redis.Redis, events: list[Event]
) -> None:
    queued = retries_itself.delay(ledger, "p", 1, None)  # linear_backoff: 0.1 s after attempt 1
    run_worker(burst=True)

    retrying = [kw for name, _, kw in events if name == "job_retrying"]
    assert [kw["delay"] for kw in retrying] == [pytest.approx(0.1)]
    after = get_job(queued.id)
    assert after is not None and after.status is JobStatus.SCHEDULED


@pytest.mark.usefixtures("worker_may_close_db_connections")
def test_worker_retry_with_no_attempt_left_lands_in_the_failed_store(
    ledger: str, rqueue_redis: redis.Redis, events: list[Event]
) -> None:
    queued = retries_itself.using(max_attempts=2).delay(ledger, "x", 10, 0)
    run_worker(burst=True)
    scheduled = get_job(queued.id)
    assert scheduled is not None and scheduled.status is JobStatus.SCHEDULED
    scheduled.run_now()
    run_worker(burst=True)

    failed = get_job(queued.id)
    assert failed is not None
    assert failed.status is JobStatus.FAILED and failed.attempts == 2
    assert rqueue_redis.zscore(keys().failed, queued.id) is not None
    assert failed.error is not None
    assert failed.error["type"] == "django_rqueue.exceptions.Retry"
    assert "no attempt is left" in failed.error["message"]
    assert "attempt 2 of 2" in failed.error["message"]
    assert [name for name, _, _ in events][-1] == "job_failed"


@pytest.mark.usefixtures("worker_may_close_db_connections")
def test_worker_reject_fails_at_once_with_attempts_left(
    ledger: str, rqueue_redis: redis.Redis, events: list[Event]
) -> None:
    queued = rejects.delay(ledger, "r")
    run_worker(burst=True)

    failed = get_job(queued.id)
    assert failed is not None
    assert failed.status is JobStatus.FAILED
    assert failed.attempts == 1 and failed.max_attempts == 3
    assert rqueue_redis.zscore(keys().failed, queued.id) is not None
    assert rqueue_redis.zcard(keys().delayed) == 0
    assert failed.error is not None
    assert failed.error["type"] == "django_rqueue.exceptions.Reject"
    assert failed.error["message"] == "bad input r"
    outcome = [(name, kw) for name, _, kw in events if name in ("job_retrying", "job_failed")]
    assert [name for name, _ in outcome] == ["job_failed"]
    assert isinstance(outcome[0][1]["exception"], Reject)
    assert len(runs(ledger)) == 1


# --- inputs --------------------------------------------------------------------------------


@job(takes_context=True)
def report_inputs(ctx: JobContext) -> list[object]:
    return [ctx.workflow_id, ctx.inputs]


def test_a_context_without_inputs_reads_none_and_an_empty_list() -> None:
    plain: Job[None] = Job(id="default:x", name="n", queue="default", status=JobStatus.RUNNING)
    context = JobContext(job=plain, attempt=1)
    assert (context.workflow_id, context.inputs) == (None, [])


@pytest.mark.usefixtures("worker_may_close_db_connections")
def test_a_running_job_reads_its_inputs_from_the_record_it_reserved(
    rqueue_redis: redis.Redis,
) -> None:
    queued = report_inputs.delay()
    rqueue_redis.hset(
        keys().job(queued.id),
        mapping={"wf": "default:W", "dn": "2", "dw": "0", "i:1": "s3:41", "i:2": 's4:"x"'},
    )
    run_worker(burst=True)
    done = get_job(queued.id)
    assert done is not None and done.status is JobStatus.SUCCEEDED, done
    assert done.result == ["default:W", [41, "x"]]


def test_an_input_that_did_not_succeed_reads_as_a_dependency_failed() -> None:
    inputs = Inputs.of({"dn": "1", "di": "default:a", "i:1": "c2:expired:5:app.a"})
    node: Job[None] = Job(
        id="default:x", name="n", queue="default", status=JobStatus.RUNNING, inputs=inputs
    )
    expired = DependencyFailed("default:a", "app.a", "expired", "", "expired")
    assert JobContext(job=node, attempt=1).inputs == [expired]
