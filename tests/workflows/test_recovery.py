"""The pollers' sweep of stalled staged creations: back before the commit, forward after."""

from __future__ import annotations

import pytest
import redis
from pytest_django.fixtures import Settings

from django_rqueue.engine.fields import StatsFields
from django_rqueue.engine.keys import finisher_id
from django_rqueue.enqueue import write
from django_rqueue.exceptions import RedisUnavailable, WorkflowNotCreated
from django_rqueue.job import JobStatus, get_job
from django_rqueue.workflows import WorkflowState, chain, get_workflow, graph, group
from django_rqueue.workflows.nodes import WorkflowPlan
from django_rqueue.workflows.recovery import sweep_opening
from django_rqueue.workflows.staged import Creation
from tests.support.inprocess import keys, queued_ids
from tests.support.relay import run_until_settled
from tests.workflows.jobs import add, double, inputs_seen

pytestmark = pytest.mark.usefixtures("worker_may_close_db_connections")


@pytest.fixture(autouse=True)
def staged(settings: Settings) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "WORKFLOW_FORCE_OUTBOX": True}


def every_job(plan: WorkflowPlan) -> list[str]:
    return [*(n.id for n in plan.nodes), plan.finisher.id]


def past_deadline(client: redis.Redis, plan: WorkflowPlan) -> None:
    assert client.zscore(keys().opening, plan.id) is not None
    client.zadd(keys().opening, {plan.id: 0})


def test_a_creation_stalled_before_its_commit_is_rolled_back(rqueue_redis: redis.Redis):
    plan = graph.compile(chain(add.s(1, 2), inputs_seen.s().using(on_dependency_failure="run")))
    creation = Creation(plan)
    creation.open()
    creation.write_nodes()
    past_deadline(rqueue_redis, plan)

    assert sweep_opening("default") == 1

    assert get_workflow(plan.id) is None
    assert [get_job(i) for i in every_job(plan)] == [None, None, None]
    assert queued_ids(rqueue_redis) == [] and rqueue_redis.zcard(keys().waiting) == 0
    assert rqueue_redis.zcard(keys().opening) == 0


def test_a_slow_creator_committing_after_the_roll_back_is_told_and_cleans_up(
    rqueue_redis: redis.Redis,
):
    plan = graph.compile(chain(add.s(1, 2), double.s()))
    creation = Creation(plan)
    creation.open()
    past_deadline(rqueue_redis, plan)
    sweep_opening("default")
    creation.write_nodes()  # written after the roll-back

    with pytest.raises(WorkflowNotCreated) as caught:
        creation.commit()

    assert caught.value.committed is False
    assert [get_job(i) for i in every_job(plan)] == [None, None, None]


def test_a_creation_stalled_after_its_commit_is_rolled_forward(rqueue_redis: redis.Redis):
    plan = graph.compile(group(add.s(1, 2), double.s(4)).on_complete(add.si(0, 0)))
    creation = Creation(plan)
    creation.open()
    creation.write_nodes()
    creation.link()
    creation.commit()
    assert [get_job(n.id).status for n in plan.nodes] == [JobStatus.WAITING] * 2  # type: ignore[union-attr]
    past_deadline(rqueue_redis, plan)

    assert sweep_opening("default") == 1

    assert rqueue_redis.zcard(keys().opening) == 0
    assert sorted(queued_ids(rqueue_redis)) == sorted(n.id for n in plan.nodes)
    run_until_settled()
    workflow = get_workflow(plan.id)
    assert workflow is not None and workflow.wait(5).result == [3, 8]
    assert workflow.state is WorkflowState.SUCCEEDED


def test_an_empty_workflow_rolled_forward_opens_its_finisher(rqueue_redis: redis.Redis):
    plan = graph.compile(group())
    creation = Creation(plan)
    creation.open()
    creation.write_nodes()
    creation.commit()
    past_deadline(rqueue_redis, plan)

    sweep_opening("default")

    assert queued_ids(rqueue_redis) == [finisher_id(plan.id)]


def test_a_creation_within_its_grace_is_left_alone(rqueue_redis: redis.Redis):
    plan = graph.compile(chain(add.s(1, 2), double.s()))
    creation = Creation(plan)
    creation.open()
    creation.write_nodes()

    assert sweep_opening("default") == 0

    creation.run()
    assert get_job(plan.nodes[0].id).status is JobStatus.QUEUED  # type: ignore[union-attr]


def _redis_down(self: Creation) -> None:
    raise RedisUnavailable("Redis went away")


@pytest.mark.parametrize("step", ["commit", "open_gates"])
def test_a_creation_cut_off_says_whether_it_committed_and_the_sweep_completes_it(
    step: str, monkeypatch: pytest.MonkeyPatch, rqueue_redis: redis.Redis
):
    monkeypatch.setattr(write, "ENQUEUE_PATIENCE", 0.2)
    monkeypatch.setattr(Creation, step, _redis_down)
    with pytest.raises(WorkflowNotCreated) as caught:
        chain(add.s(1, 2), double.s()).delay()
    monkeypatch.undo()
    workflow_id = caught.value.workflow_id
    assert caught.value.committed is (step == "open_gates")
    rqueue_redis.zadd(keys().opening, {workflow_id: 0})

    assert sweep_opening("default") == 1

    run_until_settled()
    found = get_workflow(workflow_id)
    if step == "commit":  # rolled back: nothing of it is left, nothing ran
        assert found is None and rqueue_redis.zcard(keys().waiting) == 0
        assert queued_ids(rqueue_redis) == []
        assert int(rqueue_redis.hget(keys().stats, StatsFields.SUCCEEDED) or 0) == 0
    else:  # rolled forward: it ran to the end
        assert found is not None and found.wait(5).result == 6
