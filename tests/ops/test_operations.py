"""Staff actions (django_rqueue.ops.operations) on a real redis-server: one job, a selection,
the whole failed store, pausing and resuming a queue."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
import redis

from django_rqueue import JobStateError, JobStatus, get_job, job
from django_rqueue.engine.connection import redis_time_ms
from django_rqueue.engine.keys import QueueKeys
from django_rqueue.ops import operations
from tests.support.jobs_in_state import Jobs
from tests.support.waiting import wait_until

KEYS = QueueKeys.of("rqueue", "default")


@job(result_ttl=60)
def short_lived(n: int) -> int:
    return n


@pytest.mark.parametrize("who", ["operations", "job"])
def test_a_cancelled_record_is_kept_for_the_jobs_own_result_ttl_whoever_cancels(
    who: str, rqueue_redis: redis.Redis
):
    scheduled = short_lived.using(delay=3600).delay(1)
    if who == "operations":
        operations.perform(scheduled.id, "cancel")
    else:
        scheduled.cancel()
    cancelled = get_job(scheduled.id)
    assert cancelled is not None and cancelled.status is JobStatus.CANCELLED
    assert 0 < rqueue_redis.ttl(KEYS.job(scheduled.id)) <= 60


def test_each_single_job_action_moves_the_job_or_says_why_not(rqueue_redis: redis.Redis):
    scheduled = short_lived.using(delay=3600).delay(2)
    operations.perform(scheduled.id, "run_now")
    assert get_job(scheduled.id).status is JobStatus.QUEUED  # type: ignore[union-attr]
    with pytest.raises(JobStateError) as info:
        operations.perform(scheduled.id, "retry")
    assert info.value.state == "queued"
    operations.perform(scheduled.id, "delete")
    assert get_job(scheduled.id) is None
    with pytest.raises(JobStateError) as gone:
        operations.perform(scheduled.id, "cancel")
    assert gone.value.state is None


def test_bad_ids_and_actions_are_value_errors(rqueue_redis: redis.Redis):
    queued = short_lived.delay(3)
    with pytest.raises(ValueError, match="declared queue"):
        operations.perform("nowhere:" + "A" * 22, "cancel")
    with pytest.raises(ValueError, match="unknown action"):
        operations.perform(queued.id, "explode")
    assert get_job(queued.id).status is JobStatus.QUEUED  # type: ignore[union-attr]


def test_perform_many_reports_each_refusal_and_goes_on(rqueue_redis: redis.Redis):
    first, second = short_lived.delay(4), short_lived.using(delay=3600).delay(5)
    report = operations.perform_many([first.id, second.id, "nowhere:" + "B" * 22], "run_now")
    assert report.done == [second.id]
    assert report.refused[0] == (first.id, "it is queued")
    assert report.refused[1][0] == "nowhere:" + "B" * 22


def test_process_failed_retries_in_batches_only_what_failed_before_it_started(
    jobs: Jobs, rqueue_redis: redis.Redis
):
    # Priority 0: the late job (priority 100) is then reserved before the retried ones.
    named_a = [jobs.failed(name="app.a", priority=0) for _ in range(7)]
    named_b = [jobs.failed(name="app.b", priority=0) for _ in range(3)]
    stale = jobs.failed(name="app.a", priority=0)
    rqueue_redis.delete(KEYS.job(stale))  # listed as failed, record gone
    late: list[str] = []
    seen: list[operations.BulkResult] = []

    def progress(result: operations.BulkResult) -> None:
        seen.append(dataclasses.replace(result))
        if not late:  # a job that fails once the action is under way
            now = redis_time_ms(rqueue_redis)
            wait_until(lambda: redis_time_ms(rqueue_redis) > now, timeout=1, interval=0.001)
            late.append(jobs.failed(name="app.a"))

    result = operations.process_failed("default", "retry", name="app.a", batch=3, progress=progress)

    # 11 ids failed before the start, 3 per batch: 3 + 3 + 3 + 2.
    assert result == operations.BulkResult(done=7, skipped=3, stale=1, batches=4)
    assert [r.batches for r in seen] == [1, 2, 3, 4] and seen[-1] == result
    assert [r.done + r.skipped + r.stale for r in seen] == [3, 6, 9, 11]
    for job_id in named_a:
        retried = get_job(job_id)
        assert retried is not None and retried.status is JobStatus.QUEUED
        assert retried.attempts == 0
    assert {jobs.state(i) for i in named_b} == {"failed"}
    assert jobs.state(late[0]) == "failed"  # failed after the start: left alone
    assert rqueue_redis.zscore(KEYS.failed, stale) is None  # dropped from the store
    assert rqueue_redis.zcard(KEYS.failed) == 4


def test_process_failed_deletes_every_failed_job_of_a_queue(jobs: Jobs, rqueue_redis: redis.Redis):
    failed = [jobs.failed(name=f"app.{n}") for n in range(5)]
    other = jobs.failed(queue="emails")

    result = operations.process_failed("default", "delete", batch=2)

    assert result == operations.BulkResult(done=5, skipped=0, stale=0, batches=3)
    assert [get_job(i) for i in failed] == [None] * 5
    assert rqueue_redis.zcard(KEYS.failed) == 0
    assert jobs.state(other, "emails") == "failed"


def test_pause_and_resume_queue_apply_to_one_declared_queue(rqueue_redis: redis.Redis):
    assert operations.pause_queue("emails") is True
    assert operations.pause_queue("emails") is False
    assert rqueue_redis.exists(QueueKeys.of("rqueue", "emails").paused)
    assert not rqueue_redis.exists(KEYS.paused)
    assert operations.resume_queue("emails") is True
    assert operations.resume_queue("emails") is False
    assert not rqueue_redis.exists(QueueKeys.of("rqueue", "emails").paused)


@pytest.mark.parametrize("action", [operations.pause_queue, operations.resume_queue])
def test_pause_and_resume_refuse_an_undeclared_queue(
    action: Callable[[str], bool], rqueue_redis: redis.Redis
):
    with pytest.raises(ValueError, match="'nope' is not declared"):
        action("nope")
    assert rqueue_redis.keys("*") == []
