"""Staff actions (django_rqueue.operations) on a real redis-server: one job, a selection,
the whole failed store."""

from __future__ import annotations

import pytest
import redis

from django_rqueue import JobStateError, JobStatus, get_job, job, operations
from django_rqueue.engine.keys import QueueKeys

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
