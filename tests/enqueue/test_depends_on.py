"""``.delay()`` / ``.adelay()`` with ``using(depends_on=...)``: a job that waits for jobs
already enqueued, on both dependency paths (relayed between worker bursts:
tests/support/relay.py)."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import pytest
import redis
from django.db import transaction
from pytest_django.fixtures import Settings

from django_rqueue.exceptions import JobStateError, NotReplicated
from django_rqueue.job import CancelReason, JobStatus, get_job
from django_rqueue.testing import capture_jobs
from tests.support.inprocess import keys, queued_ids
from tests.support.redis_sentinel import SentinelSet
from tests.support.relay import run_until_settled
from tests.workflows.jobs import add, collect, explode, inputs_seen, singleton

pytestmark = pytest.mark.usefixtures("worker_may_close_db_connections")


@pytest.fixture(params=["inline", "outbox"])
def dep_path(request: pytest.FixtureRequest, settings: Settings) -> str:
    """Each test runs with same-queue edges inline, then through the outbox."""
    path: Literal["inline", "outbox"] = request.param
    settings.RQUEUE = {**settings.RQUEUE, "WORKFLOW_FORCE_OUTBOX": path == "outbox"}
    return path


def test_a_job_waits_for_its_parents_and_reads_their_results(dep_path: str):
    a = add.delay(1, 2)
    b = add.using(queue="emails").delay(3, 4)

    d = inputs_seen.using(depends_on=[a, b.id]).delay("x")

    assert d.status is JobStatus.WAITING
    found = get_job(d.id)
    assert found is not None and found.status is JobStatus.WAITING
    run_until_settled()
    found = get_job(d.id)
    assert found is not None and found.status is JobStatus.SUCCEEDED
    assert found.result == {"args": ["x"], "inputs": [3, 7], "workflow": None}


def test_pass_results_prepends_the_list_of_results(dep_path: str):
    a, b = add.delay(1, 2), add.using(queue="emails").delay(3, 4)

    d = collect.using(depends_on=[a, b], pass_results=True).delay("end")  # type: ignore[arg-type]  # the results come first

    run_until_settled()
    found = get_job(d.id)
    assert found is not None and found.result == [3, 7, "end"]


def test_parents_that_ended_already_release_it_at_once(dep_path: str):
    a, b = add.delay(1, 2), add.using(queue="emails").delay(3, 4)
    run_until_settled()

    d = collect.using(depends_on=[a, b], pass_results=True).delay()  # type: ignore[call-arg]

    found = get_job(d.id)
    assert found is not None and found.status is JobStatus.QUEUED
    run_until_settled()
    found = get_job(d.id)
    assert found is not None and found.result == [3, 7]


def test_a_failed_parent_cancels_it_by_default(dep_path: str):
    a = explode.delay(1)

    d = collect.using(depends_on=[a]).delay([])

    run_until_settled()
    found = get_job(d.id)
    assert found is not None and found.status is JobStatus.CANCELLED
    assert found.cancel_reason is CancelReason.DEPENDENCY_FAILED


def test_run_policy_gets_dependency_failed(dep_path: str):
    a = explode.delay(1)

    d = inputs_seen.using(depends_on=[a], on_dependency_failure="run").delay()

    run_until_settled()
    found = get_job(d.id)
    assert found is not None and found.status is JobStatus.SUCCEEDED
    result: Any = found.result
    assert result["inputs"][0].startswith("DependencyFailed(")


def test_a_missing_parent_raises_and_leaves_nothing(rqueue_redis: redis.Redis):
    gone = "default:no-such-job"

    with pytest.raises(JobStateError, match="does not exist"):
        inputs_seen.using(depends_on=[gone]).delay()

    assert rqueue_redis.zcard(keys().waiting) == 0 and queued_ids(rqueue_redis) == []
    assert [k for k in rqueue_redis.keys() if b":job:" in k] == []


def test_refused_options_and_ids(dep_path: str):
    a = add.delay(1, 2)
    with pytest.raises(ValueError, match="unique_key"):
        singleton.using(depends_on=[a]).delay()
    with pytest.raises((TypeError, ValueError), match="job id"):
        add.using(depends_on=["nonsense"]).delay(1, 2)
    with pytest.raises(TypeError):
        add.using(depends_on=[a], pass_results=True).delay(1, 2)  # one argument too many


@pytest.mark.django_db(transaction=True)
def test_inside_atomic_it_is_written_at_the_commit_and_not_on_rollback(
    rqueue_redis: redis.Redis,
):
    a = add.delay(1, 2)
    with transaction.atomic():
        d = inputs_seen.using(depends_on=[a]).delay()
        assert get_job(d.id) is None
    found = get_job(d.id)
    assert found is not None and found.status is JobStatus.WAITING

    with pytest.raises(ZeroDivisionError), transaction.atomic():
        rolled = inputs_seen.using(depends_on=[a]).delay()
        1 / 0  # noqa: B018
    assert get_job(rolled.id) is None


def test_adelay_writes_it_too():
    a = add.delay(1, 2)

    d = asyncio.run(inputs_seen.using(depends_on=[a]).adelay())

    assert d.status is JobStatus.WAITING
    run_until_settled()
    found = get_job(d.id)
    assert found is not None
    result: Any = found.result
    assert result["inputs"] == [3]


def test_capture_jobs_captures_it_and_writes_nothing(rqueue_redis: redis.Redis):
    with capture_jobs() as captured:
        d = inputs_seen.using(depends_on=["default:some-parent"]).delay("x")

    assert [c.job.id for c in captured] == [d.id]
    assert rqueue_redis.dbsize() == 0


@pytest.mark.parametrize("parent_queue", ["default", "emails"])  # one MULTI, or step by step
def test_under_min_replicas_ack_the_replica_has_it_at_once(settings: Settings, parent_queue: str):
    with SentinelSet(sentinels=0).start() as pair:
        settings.RQUEUE = {
            **settings.RQUEUE,
            "REDIS_URL": pair.master.url,
            "MIN_REPLICAS_ACK": 1,
            "MIN_REPLICAS_TIMEOUT": 0.3,
        }
        a = add.using(queue=parent_queue).delay(1, 2)
        d = inputs_seen.using(depends_on=[a]).delay()
        assert pair.replica is not None
        assert pair.replica.client().hget(keys().job(d.id), "s") == b"waiting"

        pair.replica.stop()
        with pytest.raises(NotReplicated) as caught:
            inputs_seen.using(depends_on=[a]).delay()
        assert caught.value.acked == 0 and len(caught.value.job_ids) == 1
