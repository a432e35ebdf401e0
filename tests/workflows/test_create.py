"""The creation of a workflow: whole or not at all, on commit, live or staged."""

from __future__ import annotations

import pytest
import redis
from django.db import transaction
from pytest_django.fixtures import Settings

from django_rqueue.engine.fields import JobFields
from django_rqueue.engine.keys import finisher_id
from django_rqueue.enqueue import write
from django_rqueue.exceptions import NotReplicated, WorkflowNotCreated
from django_rqueue.job import JobStatus, get_job
from django_rqueue.testing import capture_jobs
from django_rqueue.workflows import WorkflowState, chain, chord, get_workflow, graph, group, staged
from django_rqueue.workflows.staged import Creation
from tests.support.inprocess import keys, queued_ids
from tests.support.redis_sentinel import SentinelSet
from tests.workflows.conftest import DepPath
from tests.workflows.jobs import add, double, summarize


def statuses(ids: list[str]) -> list[JobStatus | None]:
    found = [get_job(i) for i in ids]
    return [j.status if j is not None else None for j in found]


def test_delay_writes_the_record_every_node_and_the_finisher(dep_path: DepPath):
    wf = chain(add.s(1, 2), double.s()).delay()

    assert wf.state is WorkflowState.RUNNING and len(wf.node_ids) == 2
    got = get_workflow(wf.id)
    assert got is not None and got.state is WorkflowState.RUNNING
    assert got.node_ids == wf.node_ids
    assert statuses(wf.node_ids) == [JobStatus.QUEUED, JobStatus.WAITING]
    finisher = get_job(finisher_id(wf.id))
    assert finisher is not None and finisher.status is JobStatus.WAITING
    assert finisher.inputs is not None and finisher.inputs.count == 2


def test_a_creation_leaves_no_open_creation_behind(dep_path: DepPath, rqueue_redis: redis.Redis):
    chord([add.s(1, 1), add.s(2, 2)], summarize.s()).delay()

    assert rqueue_redis.zcard(keys().opening) == 0
    assert rqueue_redis.zcard(keys().workflows) == 1


def test_a_workflow_across_queues_on_one_redis_is_written(dep_path: DepPath):
    wf = group(add.s(1, 1), add.s(2, 2).using(queue="emails")).delay()

    assert statuses(wf.node_ids) == [JobStatus.QUEUED, JobStatus.QUEUED]
    assert get_workflow(wf.id) is not None


def test_an_empty_group_is_a_workflow_whose_finisher_is_ready_at_once(dep_path: DepPath):
    wf = group().delay()

    finisher = get_job(finisher_id(wf.id))
    assert wf.node_ids == [] and finisher is not None
    assert finisher.status is JobStatus.QUEUED


@pytest.mark.django_db(transaction=True)
def test_inside_atomic_the_workflow_is_written_at_the_commit(dep_path: DepPath):
    with transaction.atomic():
        wf = chain(add.s(1, 2), double.s()).delay()
        assert wf.id and len(wf.node_ids) == 2
        assert get_workflow(wf.id) is None
        assert statuses(wf.node_ids) == [None, None]

    assert get_workflow(wf.id) is not None
    assert statuses(wf.node_ids) == [JobStatus.QUEUED, JobStatus.WAITING]


@pytest.mark.django_db(transaction=True)
def test_a_rollback_writes_nothing(dep_path: DepPath, rqueue_redis: redis.Redis):
    before = rqueue_redis.dbsize()
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        wf = chain(add.s(1, 2), double.s()).delay()
        1 / 0  # noqa: B018

    assert get_workflow(wf.id) is None
    assert statuses([*wf.node_ids, finisher_id(wf.id)]) == [None, None, None]
    assert rqueue_redis.dbsize() == before


def test_an_unreachable_redis_raises_workflow_not_created(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
):
    settings.RQUEUE = {**settings.RQUEUE, "REDIS_URL": "redis://127.0.0.1:1/0"}
    monkeypatch.setattr(write, "ENQUEUE_PATIENCE", 0.3)

    with pytest.raises(WorkflowNotCreated) as caught:
        chain(add.s(1, 2), double.s()).delay()

    assert caught.value.committed is False


def test_a_staged_creation_stopped_before_its_commit_runs_nothing(
    settings: Settings, rqueue_redis: redis.Redis
):
    settings.RQUEUE = {**settings.RQUEUE, "WORKFLOW_FORCE_OUTBOX": True}
    plan = graph.compile(chain(add.s(1, 2), double.s()))
    assert plan.path == "staged"
    creation = Creation(plan)
    creation.open()
    creation.write_nodes()

    # The source is gated: it waits for its gate as its dependent waits for it.
    source = get_job(plan.nodes[0].id)
    assert source is not None and source.status is JobStatus.WAITING
    assert rqueue_redis.hget(keys().job(plan.nodes[0].id), JobFields.GATE) is not None
    assert rqueue_redis.zscore(keys().opening, plan.id) is not None
    assert queued_ids(rqueue_redis) == []

    creation.run()  # the rest of the steps: commit, gates, opened

    assert creation.committed
    assert statuses([n.id for n in plan.nodes]) == [JobStatus.QUEUED, JobStatus.WAITING]
    assert rqueue_redis.zscore(keys().opening, plan.id) is None


def test_a_staged_creation_run_again_writes_nothing_twice(
    settings: Settings, rqueue_redis: redis.Redis
):
    settings.RQUEUE = {**settings.RQUEUE, "WORKFLOW_FORCE_OUTBOX": True}
    plan = graph.compile(chain(add.s(1, 2), double.s()))
    Creation(plan).run()
    before = {k: rqueue_redis.type(k) for k in rqueue_redis.keys()}

    again = Creation(plan)
    again.run()

    assert {k: rqueue_redis.type(k) for k in rqueue_redis.keys()} == before
    assert statuses([n.id for n in plan.nodes]) == [JobStatus.QUEUED, JobStatus.WAITING]


def test_under_min_replicas_ack_the_replica_has_the_workflow_at_once(settings: Settings):
    with SentinelSet(sentinels=0).start() as pair:
        settings.RQUEUE = {
            **settings.RQUEUE,
            "REDIS_URL": pair.master.url,
            "MIN_REPLICAS_ACK": 1,
            "MIN_REPLICAS_TIMEOUT": 0.3,
        }
        wf = chain(add.s(1, 2), double.s()).delay()
        assert pair.replica is not None
        replica = pair.replica.client()
        assert replica.exists(keys().workflow(wf.id), *(keys().job(i) for i in wf.node_ids)) == 3

        pair.replica.stop()
        with pytest.raises(NotReplicated) as caught:
            chain(add.s(1, 2), double.s()).delay()
        assert caught.value.acked == 0 and len(caught.value.job_ids) == 3


def test_capture_jobs_records_a_workflow_rather_than_write_it(rqueue_redis: redis.Redis):
    with capture_jobs() as captured:
        wf = chain(add.s(1, 2), double.s()).delay()

    assert captured == [] and [w.id for w in captured.workflows] == [wf.id]
    assert rqueue_redis.dbsize() == 0  # tests/test_testing.py checks what it records


def test_a_slow_staged_step_is_logged(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
):
    settings.RQUEUE = {**settings.RQUEUE, "WORKFLOW_FORCE_OUTBOX": True}
    monkeypatch.setattr(staged, "CREATE_GRACE_MS", 0)  # every step is "slow"

    with caplog.at_level("WARNING", logger="django_rqueue"):
        wf = chain(add.s(1, 2), double.s()).delay()

    steps = [r.args[1] for r in caplog.records if "creation step" in r.getMessage()]  # type: ignore[index]
    assert steps == ["open", "write_nodes", "link", "commit", "open_gates", "opened"]
    assert wf.id in caplog.records[0].getMessage()
