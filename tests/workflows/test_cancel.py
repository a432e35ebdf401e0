"""Workflow.cancel(): every node that has not ended ends cancelled ``workflow_cancelled``
(running ones through their master), the finisher still runs and closes it ``cancelled``."""

from __future__ import annotations

import pytest
import redis

from django_rqueue.engine import workflow_record as record
from django_rqueue.engine.fields import JobFields, StatsFields
from django_rqueue.engine.keys import finisher_id
from django_rqueue.engine.queue_ref import queue_ref
from django_rqueue.engine.run import execute
from django_rqueue.engine.workflow_calls import Cancelled
from django_rqueue.engine.workflow_record import RecordReply, RecordState
from django_rqueue.exceptions import WorkflowStateError
from django_rqueue.ops import operations
from django_rqueue.workflows import WorkflowState, chain, control, get_workflow, group
from tests.support import transitions
from tests.support import workflows as wf
from tests.workflows.conftest import DepPath
from tests.workflows.jobs import fetch, mail, parse, store, summarize

REASON = "workflow_cancelled"


def three() -> object:
    return chain(fetch.s("a"), parse.s(), store.s())


def released() -> int:
    ref = queue_ref("default")
    return int(ref.client().hget(ref.keys.stats, StatsFields.RELEASED) or 0)


def test_cancel_before_anything_ran_cancels_every_node_and_the_finisher_closes_it(
    rqueue_redis: redis.Redis, dep_path: DepPath
):
    plan = wf.create(three())
    before = released()  # the staged path releases its sources when it opens their gates
    ids = [n.id for n in plan.nodes]
    assert [wf.state(i) for i in ids] == ["queued", "waiting", "waiting"]
    handle = get_workflow(plan.id)
    assert handle is not None
    handle.cancel()
    assert handle.cancel_requested and handle.state is WorkflowState.RUNNING
    for node_id in ids:
        fields = wf.job(node_id)
        assert (fields[JobFields.STATE], fields[JobFields.CANCEL_REASON]) == ("cancelled", REASON)
    wf.relay()
    assert wf.waiting("default") == set() and wf.state(finisher_id(plan.id)) == "queued"
    assert wf.record(plan)["st"] == "cancelling"
    # The finisher was not cancelled: it is released by the cancels and ends the workflow.
    assert wf.finish(plan) == RecordReply("first", RecordState.CANCELLED, 0)
    got = get_workflow(plan.id)
    assert got is not None and got.state is WorkflowState.CANCELLED
    assert [j.status for j in got.jobs] == ["cancelled"] * 3
    assert released() - before == 1  # the finisher only


def test_cancel_asks_a_running_node_to_stop_and_its_master_ends_it(
    rqueue_redis: redis.Redis, dep_path: DepPath
):
    plan = wf.create(three())
    first, second, third = (n.id for n in plan.nodes)
    t = wf.reserve(first)
    assert control.cancel(plan.id) == Cancelled(cancelled=2, requested=1)
    running = wf.job(first)
    assert running[JobFields.STATE] == "running"
    assert int(running[JobFields.CANCEL_REQUESTED]) > 0
    assert running[JobFields.CANCEL_BY_WORKFLOW] == "1"
    assert [wf.state(second), wf.state(third)] == ["cancelled", "cancelled"]
    # What the worker's master does once it has stopped the job.
    ref = queue_ref("default")
    transitions.cancel_running(ref.client(), ref.keys, first, t, ttl=600)
    ended = wf.job(first)
    assert (ended[JobFields.STATE], ended[JobFields.CANCEL_REASON]) == ("cancelled", REASON)
    assert wf.finish(plan).state is RecordState.CANCELLED


def test_cancel_of_a_finished_or_unknown_workflow_is_refused(
    rqueue_redis: redis.Redis, dep_path: DepPath
):
    plan = wf.create(chain(fetch.s("a"), parse.s()))
    for node in plan.nodes:
        wf.succeed(node.id, '"x"')
    assert wf.finish(plan).state is RecordState.SUCCEEDED
    with pytest.raises(WorkflowStateError, match="it is succeeded") as caught:
        control.cancel(plan.id)
    assert (caught.value.workflow_id, caught.value.state) == (plan.id, "succeeded")
    assert wf.record(plan)["st"] == "succeeded"
    home = queue_ref(plan.home)
    home.client().delete(home.keys.workflow(plan.id))
    with pytest.raises(WorkflowStateError, match="no longer exists") as gone:
        control.cancel(plan.id)
    assert gone.value.state is None


def test_cancel_twice_changes_nothing_more(rqueue_redis: redis.Redis, dep_path: DepPath):
    plan = wf.create(group(fetch.s("a"), mail.s("b@x")) | summarize.s())
    a, b, body = (n.id for n in plan.nodes)
    wf.reserve(a)
    assert control.cancel(plan.id) == Cancelled(cancelled=2, requested=1)
    before = {i: wf.job(i) for i in (a, b, body)}
    # Once more (an interrupted cancel run again): the running node is asked again, with
    # its first request's time kept; nothing else changes.
    assert control.cancel(plan.id) == Cancelled(cancelled=0, requested=1)
    assert {i: wf.job(i) for i in (a, b, body)} == before
    assert wf.record(plan)["st"] == "cancelling"


@pytest.mark.parametrize("first", ["input", "cancel"])
def test_cancel_racing_the_last_input_releases_the_dependent_at_most_once(
    rqueue_redis: redis.Redis, dep_path: DepPath, first: str
):
    plan = wf.create(chain(fetch.s("a"), parse.s()))
    head, dependent = (n.id for n in plan.nodes)
    before = released()  # the staged path releases its sources when it opens their gates
    t = wf.reserve(head)
    ref = queue_ref("default")
    if first == "input":
        # The last input ends first: the dependent is released, then cancelled from queued.
        transitions.ack(ref.client(), ref.keys, head, t, '"a"', 600)
        wf.relay()
        assert wf.state(dependent) == "queued" and released() - before == 1
        assert control.cancel(plan.id) == Cancelled(cancelled=1, requested=0)
    else:
        # The cancel comes first: the dependent is cancelled while waiting; the input's
        # success (its master did not stop it in time) then finds it ended: no release.
        assert control.cancel(plan.id) == Cancelled(cancelled=1, requested=1)
        transitions.ack(ref.client(), ref.keys, head, t, '"a"', 600)
        wf.relay()
        assert released() - before == 1  # the finisher, not the dependent
    assert wf.state(head) == "succeeded"
    ended = wf.job(dependent)
    assert (ended[JobFields.STATE], ended[JobFields.CANCEL_REASON]) == ("cancelled", REASON)
    assert wf.finish(plan).state is RecordState.CANCELLED
    assert transitions.reserve(ref.client(), ref.keys, lease_ms=1000, worker_id="w") is None


@pytest.mark.parametrize("action", ["cancel", "delete"])
def test_the_staff_cancel_or_delete_of_a_waiting_node_tells_its_dependents(
    rqueue_redis: redis.Redis, dep_path: DepPath, action: str
):
    plan = wf.create(three())
    _first, second, third = (n.id for n in plan.nodes)
    assert operations.perform(second, action) is None
    assert second not in wf.waiting("default")
    if action == "cancel":
        assert wf.state(second) == "cancelled"
    else:
        assert wf.job(second) == {}
    wf.relay()
    ended = wf.job(third)
    assert (ended[JobFields.STATE], ended[JobFields.CANCEL_REASON]) == (
        "cancelled",
        "dependency_failed",
    )
    assert third not in wf.waiting("default")


def test_a_cancel_interrupted_after_the_record_completes_when_called_again(
    rqueue_redis: redis.Redis, dep_path: DepPath
):
    plan = wf.create(three())
    home = queue_ref(plan.home)
    # A client killed after its first step: the record says cancelling, no node was touched.
    assert execute(home.client(), record.cancel(home.keys, plan.id)).done
    assert [wf.state(n.id) for n in plan.nodes] == ["queued", "waiting", "waiting"]
    assert control.cancel(plan.id) == Cancelled(cancelled=3, requested=0)
    assert [wf.job(n.id)[JobFields.CANCEL_REASON] for n in plan.nodes] == [REASON] * 3
    assert wf.finish(plan).state is RecordState.CANCELLED
