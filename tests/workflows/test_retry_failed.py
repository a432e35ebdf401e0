"""Workflow.retry_failed(): the failed nodes run again, the nodes they cancelled and the
finisher are re-armed behind tombstones, a succeeded node never runs again; stale outcomes
of the old run change nothing; an interrupted retry completes when called again."""

from __future__ import annotations

import pytest
import redis

from django_rqueue.engine import dependency_commands, workflow_calls
from django_rqueue.engine import workflow_record as record
from django_rqueue.engine.fields import JobFields, WorkflowFields
from django_rqueue.engine.keys import finisher_id
from django_rqueue.engine.queue_ref import queue_ref
from django_rqueue.engine.run import execute
from django_rqueue.engine.workflow_record import RecordState
from django_rqueue.exceptions import JobStateError, WorkflowStateError
from django_rqueue.inputs import inputs_of
from django_rqueue.ops import operations
from django_rqueue.workflows import WorkflowState, chain, control, get_workflow, group
from django_rqueue.workflows.nodes import WorkflowPlan
from tests.support import workflows as wf
from tests.workflows.conftest import DepPath
from tests.workflows.jobs import anything, fetch, mail, parse, store, summarize


def failed_chain() -> tuple[WorkflowPlan, list[str]]:
    """A chain a -> b -> c -> d whose a succeeded and b failed (c, d cancelled by it),
    finished ``failed``."""
    plan = wf.create(chain(fetch.s("a"), parse.s(), store.s(), summarize.s()))
    ids = [n.id for n in plan.nodes]
    wf.succeed(ids[0], '"a b"')
    wf.fail(ids[1])
    wf.relay()
    for node_id in ids[2:]:
        fields = wf.job(node_id)
        assert (fields[JobFields.STATE], fields[JobFields.CANCEL_REASON]) == (
            "cancelled",
            "dependency_failed",
        )
    assert wf.finish(plan).state is RecordState.FAILED
    return plan, ids


def opening(plan: WorkflowPlan) -> set[str]:
    home = queue_ref(plan.home)
    members: list[bytes] = home.client().zrange(home.keys.opening, 0, -1)  # type: ignore[assignment]
    return {m.decode() for m in members}


def check_rearmed(plan: WorkflowPlan, ids: list[str], tokens: dict[str, int]) -> None:
    """The state right after a complete retry_failed() of :func:`failed_chain`."""
    a, b, c, d = ids
    fid = finisher_id(plan.id)
    assert wf.state(a) == "succeeded" and wf.token(a) == tokens[a]  # never re-run
    assert wf.state(b) == "queued" and wf.token(b) == tokens[b] + 1
    assert wf.job(b)[JobFields.ATTEMPTS] == "0"
    for node_id in (c, d, fid):
        fields = wf.job(node_id)
        assert fields[JobFields.STATE] == "waiting", (node_id, fields)
        assert fields[JobFields.INPUTS_MISSING] == "1" if node_id != fid else "2"
        assert wf.token(node_id) == tokens[node_id] + 1
        assert JobFields.CANCEL_REASON not in fields and JobFields.FINISHED_AT not in fields
    assert wf.waiting("default") == {c, d, fid}
    # The finisher keeps a's success, and waits for b, c, d again; its d's was a cancel.
    f = wf.job(fid)
    assert f["i:1"].startswith("s")
    assert [f["i:2"], f["i:3"], f["i:4"]] == [f"r{tokens[b]}", f"r{tokens[c]}", f"r{tokens[d]}"]
    assert (f[JobFields.INPUTS_FAILED], f[JobFields.INPUTS_CANCELLED]) == ("0", "0")
    got = wf.record(plan)
    assert (got["st"], got["gen"]) == ("running", "1") and "plan" not in got
    assert opening(plan) == set()


def test_a_failed_chain_reruns_the_failed_node_then_the_nodes_it_cancelled(
    rqueue_redis: redis.Redis, dep_path: DepPath
):
    plan, ids = failed_chain()
    a, b, c, d = ids
    tokens = {i: wf.token(i) for i in (*ids, finisher_id(plan.id))}
    handle = get_workflow(plan.id)
    assert handle is not None and handle.state is WorkflowState.FAILED
    retried = handle
    retried.retry_failed()
    assert retried.state is WorkflowState.RUNNING
    check_rearmed(plan, ids, tokens)
    # The re-run: b, then c and d it had cancelled; a's result still feeds b's chain.
    wf.succeed(b, '"x y"')
    wf.relay()
    assert wf.state(c) == "queued"
    assert inputs_of(wf.job(c)) == ["x y"]
    wf.succeed(c, "2")
    wf.succeed(d, "1")
    assert wf.finish(plan).state is RecordState.SUCCEEDED
    assert wf.token(a) == tokens[a]
    got = get_workflow(plan.id)
    assert got is not None and got.state is WorkflowState.SUCCEEDED and got.generation == 1


def test_a_chord_reruns_only_its_failed_member(rqueue_redis: redis.Redis, dep_path: DepPath):
    plan = wf.create(group(fetch.s("a"), fetch.s("b")) | summarize.s())
    a, b, body = (n.id for n in plan.nodes)
    wf.fail(a)
    wf.succeed(b, '"b"')
    wf.relay()
    assert wf.job(body)[JobFields.CANCEL_REASON] == "dependency_failed"
    assert wf.finish(plan).state is RecordState.FAILED
    kept, token_b = wf.job(body)["i:2"], wf.token(b)
    done = control.retry_failed(plan.id)
    assert [s.job_id for s in done.arms] == [finisher_id(plan.id), body]
    assert [s.job_id for s in done.requeues] == [a]
    rearmed = wf.job(body)
    assert rearmed["i:2"] == kept and rearmed[JobFields.INPUTS_MISSING] == "1"
    wf.succeed(a, '"a"')
    wf.relay()
    assert wf.state(body) == "queued" and inputs_of(wf.job(body)) == ["a", "b"]
    wf.succeed(body, "2")
    assert wf.finish(plan).state is RecordState.SUCCEEDED
    assert wf.token(b) == token_b and wf.state(b) == "succeeded"


def test_a_stale_outcome_of_the_old_run_changes_nothing(
    rqueue_redis: redis.Redis, dep_path: DepPath
):
    plan, ids = failed_chain()
    _a, b, c, d = ids
    fid = finisher_id(plan.id)
    # What the old run emitted, as a relay that died before its XDEL delivers it again.
    old = [(c, 1, wf.job(c)["i:1"]), (d, 1, wf.job(d)["i:1"]), (fid, 2, wf.job(fid)["i:2"])]
    assert [v[2][0] for v in old] == ["f", "c", "f"]
    control.retry_failed(plan.id)
    before = {i: wf.job(i) for i in (c, d, fid)}
    ref = queue_ref("default")
    got = execute(ref.client(), dependency_commands.dep_apply(ref.keys, old))
    assert (got.applied, got.duplicates) == (0, 3)
    assert {i: wf.job(i) for i in (c, d, fid)} == before
    # The re-run's own outcome (a higher token) is accepted.
    wf.fail(b)
    wf.relay()
    assert wf.job(c)[JobFields.CANCEL_REASON] == "dependency_failed"
    assert wf.finish(plan).state is RecordState.FAILED


@pytest.mark.parametrize("arms_done", [0, 1, 2])
def test_an_interrupted_retry_completes_when_called_again(
    rqueue_redis: redis.Redis, dep_path: DepPath, arms_done: int
):
    plan, ids = failed_chain()
    tokens = {i: wf.token(i) for i in (*ids, finisher_id(plan.id))}
    home = queue_ref(plan.home)
    raw: dict[bytes, bytes] = home.client().hgetall(home.keys.workflow(plan.id))  # type: ignore[assignment]
    fields = {k.decode(): v for k, v in raw.items()}
    planned = control.plan_retry(plan.id, fields)
    reopen = record.reopen(home.keys, plan.id, control.REOPEN_GRACE_MS, planned.to_json())
    assert execute(home.client(), reopen).done
    assert plan.id in opening(plan)
    # A client killed after the reopen, and after some of the arms.
    step = workflow_calls.wf_rearm(home.keys, planned.deadline_ms, planned.arms[:arms_done])
    assert execute(home.client(), step) == [True] * arms_done
    handle = get_workflow(plan.id)
    assert handle is not None and handle.state is WorkflowState.RUNNING
    assert control.retry_failed(plan.id) == planned
    check_rearmed(plan, ids, tokens)
    # Once more: nothing more (every step is skipped, the record stays running).
    before = {i: wf.job(i) for i in (*ids, finisher_id(plan.id))}
    with pytest.raises(WorkflowStateError, match="still running"):
        control.retry_failed(plan.id)
    replay = workflow_calls.wf_rearm(home.keys, planned.deadline_ms, planned.arms)
    assert execute(home.client(), replay) == [False] * len(planned.arms)
    assert {i: wf.job(i) for i in (*ids, finisher_id(plan.id))} == before


def test_retry_failed_is_refused_unless_the_workflow_failed(
    rqueue_redis: redis.Redis, dep_path: DepPath
):
    plan = wf.create(chain(fetch.s("a"), parse.s()))
    a, b = (n.id for n in plan.nodes)
    with pytest.raises(WorkflowStateError, match="still running") as running:
        control.retry_failed(plan.id)
    assert running.value.state == "running"
    wf.succeed(a, '"a"')
    wf.succeed(b, "[]")
    assert wf.finish(plan).state is RecordState.SUCCEEDED
    with pytest.raises(WorkflowStateError, match="it is succeeded"):
        control.retry_failed(plan.id)
    cancelled = wf.create(chain(fetch.s("a"), parse.s()))
    control.cancel(cancelled.id)
    assert wf.finish(cancelled).state is RecordState.CANCELLED
    with pytest.raises(WorkflowStateError, match="it is cancelled"):
        control.retry_failed(cancelled.id)
    assert wf.record(cancelled)[WorkflowFields.STATE] == "cancelled"


def test_the_staff_retry_of_a_failed_node_retries_its_workflow(
    rqueue_redis: redis.Redis, dep_path: DepPath
):
    plan, ids = failed_chain()
    message = operations.perform(ids[1], "retry")
    assert message is not None
    assert f"part of workflow {plan.id}" in message and "retry_failed()" in message
    assert "1 failed node(s)" in message and "2 node(s) they had cancelled" in message
    assert wf.state(ids[1]) == "queued" and wf.state(ids[2]) == "waiting"
    assert wf.record(plan)[WorkflowFields.STATE] == "running"


def test_the_staff_retry_of_a_node_of_a_running_workflow_is_refused(
    rqueue_redis: redis.Redis, dep_path: DepPath
):
    plan = wf.create(group(fetch.s("a"), fetch.s("b")))
    a, b = (n.id for n in plan.nodes)
    wf.fail(a)
    with pytest.raises(JobStateError, match=f"part of workflow {plan.id}.*still running"):
        operations.perform(a, "retry")
    assert wf.state(a) == "failed" and wf.state(b) == "queued"
    # A plain job's retry is unchanged (no message).
    plain = fetch.delay("x")
    ref = queue_ref("default")
    wf.reserve(b)  # b is ahead of the plain job in the queue
    wf.fail(plain.id)
    assert operations.perform(plain.id, "retry") is None
    assert wf.state(plain.id) == "queued" and ref.client().exists(ref.keys.job(plain.id))


def test_a_failed_run_node_after_a_failed_node_waits_for_its_rerun(
    rqueue_redis: redis.Redis, dep_path: DepPath
):
    plan = wf.create(
        chain(fetch.s("a"), anything.s().using(on_dependency_failure="run"), store.s())
    )
    a, b, c = (n.id for n in plan.nodes)
    wf.fail(a)
    wf.fail(b)  # it ran with a DependencyFailed, and failed too
    wf.relay()
    assert wf.job(c)[JobFields.CANCEL_REASON] == "dependency_failed"
    assert wf.finish(plan).state is RecordState.FAILED
    done = control.retry_failed(plan.id)
    assert [s.job_id for s in done.arms] == [finisher_id(plan.id), c, b]
    assert [s.job_id for s in done.requeues] == [a]
    assert (wf.state(a), wf.state(b), wf.state(c)) == ("queued", "waiting", "waiting")
    wf.succeed(a, '"a"')
    wf.relay()
    assert wf.state(b) == "queued" and inputs_of(wf.job(b)) == ["a"]
    wf.succeed(b, '["a"]')
    wf.succeed(c, "1")
    assert wf.finish(plan).state is RecordState.SUCCEEDED


def test_a_node_cancelled_otherwise_stops_the_closure(rqueue_redis: redis.Redis, dep_path: DepPath):
    plan = wf.create(chain(fetch.s("a"), parse.s(), store.s()))
    a, b, c = (n.id for n in plan.nodes)
    assert operations.perform(b, "cancel") is None  # a staff cancel, not the failure's
    wf.fail(a)
    wf.relay()
    assert wf.job(c)[JobFields.CANCEL_REASON] == "dependency_failed"
    assert wf.finish(plan).state is RecordState.FAILED
    done = control.retry_failed(plan.id)
    assert [s.job_id for s in done.arms] == [finisher_id(plan.id)]
    assert [s.job_id for s in done.requeues] == [a]
    assert (wf.state(b), wf.state(c)) == ("cancelled", "cancelled")
    wf.succeed(a, '"a"')
    assert wf.finish(plan).state is RecordState.FAILED  # b and c still did not run


def test_a_workflow_across_queues_is_retried_on_each_queue(
    rqueue_redis: redis.Redis, dep_path: DepPath
):
    plan = wf.create(chain(fetch.s("a@x"), mail.s(), store.s()))
    a, m, c = (n.id for n in plan.nodes)
    assert wf.ref_of(m).name == "emails" and wf.ref_of(c).name == "default"
    wf.succeed(a, '"a@x"')
    wf.fail(m)
    wf.relay()
    assert wf.finish(plan).state is RecordState.FAILED
    tokens = {i: wf.token(i) for i in (a, m, c)}
    control.retry_failed(plan.id)
    assert (wf.state(m), wf.token(m)) == ("queued", tokens[m] + 1)
    assert wf.job(c)["i:1"] == f"r{tokens[m]}" and c in wf.waiting("default")
    wf.succeed(m, "null")
    wf.relay()
    assert wf.state(c) == "queued"
    wf.succeed(c, "0")
    assert wf.finish(plan).state is RecordState.SUCCEEDED
    assert wf.token(a) == tokens[a]


def test_retry_failed_names_the_records_it_needs_that_expired(
    rqueue_redis: redis.Redis, dep_path: DepPath
):
    plan, ids = failed_chain()
    ref = queue_ref("default")
    ref.client().delete(ref.keys.job(ids[3]))
    with pytest.raises(WorkflowStateError, match=f"records of {ids[3]} have expired"):
        control.retry_failed(plan.id)
    assert wf.record(plan)[WorkflowFields.STATE] == "failed"  # nothing changed
    assert (wf.state(ids[1]), wf.state(ids[2])) == ("failed", "cancelled")
    ref.client().delete(ref.keys.job(finisher_id(plan.id)))
    with pytest.raises(WorkflowStateError, match="its finisher is expired"):
        control.retry_failed(plan.id)


def test_a_workflow_that_failed_without_a_failed_node_has_nothing_to_retry(
    rqueue_redis: redis.Redis, dep_path: DepPath
):
    plan = wf.create(chain(fetch.s("a"), parse.s()))
    a, _b = (n.id for n in plan.nodes)
    assert operations.perform(a, "cancel") is None
    assert wf.finish(plan).state is RecordState.FAILED
    with pytest.raises(WorkflowStateError, match="no failed node to re-run"):
        control.retry_failed(plan.id)
    assert wf.record(plan)[WorkflowFields.STATE] == "failed"


def test_an_unreadable_stored_plan_is_a_workflow_state_error(
    rqueue_redis: redis.Redis, dep_path: DepPath
):
    plan, _ids = failed_chain()
    home = queue_ref(plan.home)
    reopen = record.reopen(home.keys, plan.id, control.REOPEN_GRACE_MS, '{"a": 1}')
    assert execute(home.client(), reopen).done
    with pytest.raises(WorkflowStateError, match="stored plan is unreadable"):
        control.retry_failed(plan.id)
