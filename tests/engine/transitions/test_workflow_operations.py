"""wf_cancel.lua and wf_rearm.lua: the per-queue steps of Workflow.cancel() and
Workflow.retry_failed(), each idempotent by its state checks, on the inline and the outbox
path."""

from __future__ import annotations

import pytest
import redis

from django_rqueue.dependencies import EdgePath
from django_rqueue.engine import workflow_calls
from django_rqueue.engine.calls import Arg, ScriptCall
from django_rqueue.engine.commands import Command
from django_rqueue.engine.fields import JobFields
from django_rqueue.engine.keys import new_job_id
from django_rqueue.engine.run import execute
from django_rqueue.engine.workflow_calls import Cancelled, Rearm
from tests.support.dependencies import (
    add_nodes,
    apply,
    arrivals,
    check_waiting,
    deliver,
    edge,
    node,
)
from tests.support.engine import Engine

REASON = "workflow_cancelled"


def wf_cancel(engine: Engine, *ids: str) -> Cancelled:
    return execute(engine.client, workflow_calls.wf_cancel(engine.keys, ids, 600))


def member(engine: Engine, path: EdgePath, state: str) -> tuple[str, str]:
    """A node ``a`` in ``state`` whose one dependent ``d`` (policy "run") waits for it."""
    a, d, x = (new_job_id(engine.queue) for _ in range(3))
    nodes = [node(engine, job_id=d, inputs=[a], run=True)]
    if state == "waiting":
        nodes.append(node(engine, job_id=a, inputs=[x], nx=edge(d, 1, path), name="t.a"))
    else:
        delay = 60_000 if state == "scheduled" else 0
        nodes.append(node(engine, job_id=a, nx=edge(d, 1, path), delay_ms=delay, name="t.a"))
    assert add_nodes(engine, nodes) == []
    if state == "running":
        assert engine.reserve_id() == a
    elif state == "succeeded":
        engine.ack(engine.reserve_id())
    elif state == "failed":
        engine.fail(engine.reserve_id())
    deliver(engine, path)
    return a, d


@pytest.mark.parametrize("state", ["waiting", "scheduled", "queued"])
def test_a_pending_node_is_cancelled_with_the_workflow_reason_and_tells_its_dependent(
    engine: Engine, path: EdgePath, state: str
):
    a, d = member(engine, path, state)
    assert wf_cancel(engine, a) == Cancelled(cancelled=1, requested=0)
    fields = engine.job(a)
    assert (fields[JobFields.STATE], fields[JobFields.CANCEL_REASON]) == ("cancelled", REASON)
    assert engine.client.ttl(engine.keys.job(a)) > 0
    assert a not in engine.zset(engine.keys.waiting)
    assert a not in engine.zset(engine.keys.delayed)
    deliver(engine, path)
    got = arrivals(engine, d)[1]
    assert (got.kind, got.reason, got.name) == ("c", REASON, "t.a")
    assert engine.state(d) == "queued"  # policy "run": released by its last input
    check_waiting(engine)
    before = engine.snapshot()
    # Sent again (an interrupted cancel run again): nothing more.
    assert wf_cancel(engine, a) == Cancelled(0, 0)
    assert engine.snapshot() == before
    assert engine.drain() == [d]  # the cancelled node is in no queue


def test_a_running_node_is_asked_to_stop_once_and_keeps_running(engine: Engine, path: EdgePath):
    a, d = member(engine, path, "running")
    assert wf_cancel(engine, a) == Cancelled(cancelled=0, requested=1)
    fields = engine.job(a)
    asked = fields[JobFields.CANCEL_REQUESTED]
    assert fields[JobFields.STATE] == "running" and fields[JobFields.CANCEL_BY_WORKFLOW] == "1"
    assert wf_cancel(engine, a) == Cancelled(cancelled=0, requested=1)
    assert engine.job(a)[JobFields.CANCEL_REQUESTED] == asked  # the first request's time
    deliver(engine, path)
    assert engine.state(d) == "waiting" and arrivals(engine, d) == {}


@pytest.mark.parametrize("state", ["succeeded", "failed"])
def test_an_ended_node_is_left_alone(engine: Engine, path: EdgePath, state: str):
    a, _d = member(engine, path, state)
    before = engine.snapshot()
    assert wf_cancel(engine, a) == Cancelled(0, 0)
    assert engine.snapshot() == before


def test_a_missing_or_corrupt_node_is_skipped(engine: Engine):
    missing, corrupt = new_job_id(engine.queue), new_job_id(engine.queue)
    engine.client.set(engine.keys.job(corrupt), "not a hash")
    assert wf_cancel(engine, missing, corrupt) == Cancelled(0, 0)
    assert not engine.client.exists(engine.keys.job(missing))
    assert engine.client.get(engine.keys.job(corrupt)) == b"not a hash"


def test_a_bad_ttl_is_refused_before_anything(engine: Engine):
    with pytest.raises(ValueError, match="> 0 s"):
        workflow_calls.wf_cancel(engine.keys, ["x"], 0)


# -- wf_rearm.lua ------------------------------------------------------------------------


def rearm(engine: Engine, *steps: Rearm, deadline_ms: int = 60_000) -> list[bool]:
    return execute(engine.client, workflow_calls.wf_rearm(engine.keys, deadline_ms, steps))


def failed_pair(engine: Engine, path: EdgePath) -> tuple[str, str]:
    """``x`` failed, and its dependent ``d`` (policy "cancel") cancelled by it."""
    x, d = new_job_id(engine.queue), new_job_id(engine.queue)
    nodes = [node(engine, job_id=d, inputs=[x]), node(engine, job_id=x, nx=edge(d, 1, path))]
    assert add_nodes(engine, nodes) == []
    engine.fail(engine.reserve_id())
    deliver(engine, path)
    assert engine.job(d)[JobFields.CANCEL_REASON] == "dependency_failed"
    return x, d


def test_arm_and_requeue_rerun_a_failed_input_behind_a_tombstone(engine: Engine, path: EdgePath):
    x, d = failed_pair(engine, path)
    tx, td = engine.token(x), engine.token(d)
    old = engine.job(d)["i:1"]
    assert engine.job(d)[JobFields.INPUTS_FAILED] == "1"
    now = engine.now_ms()
    arm, requeue = Rearm("arm", d, td, ((1, tx),)), Rearm("requeue", x, tx)
    assert rearm(engine, arm, requeue) == [True, True]
    armed = engine.job(d)
    assert armed[JobFields.STATE] == "waiting" and armed["i:1"] == f"r{tx}"
    assert (armed[JobFields.INPUTS_MISSING], armed[JobFields.INPUTS_FAILED]) == ("1", "0")
    assert JobFields.CANCEL_REASON not in armed and engine.token(d) == td + 1
    assert engine.client.ttl(engine.keys.job(d)) == -1
    assert now + 60_000 <= engine.zset(engine.keys.waiting)[d] <= engine.now_ms() + 60_000
    requeued = engine.job(x)
    assert (requeued[JobFields.STATE], requeued[JobFields.ATTEMPTS]) == ("queued", "0")
    assert engine.token(x) == tx + 1 and x not in engine.zset(engine.keys.failed)
    check_waiting(engine)
    # Sent again (a replay of the stored plan): every item is skipped.
    before = engine.snapshot()
    assert rearm(engine, arm, requeue) == [False, False]
    assert engine.snapshot() == before
    # The old outcome, delivered again, is refused; the re-run's success releases d.
    assert apply(engine, [(d, 1, old)]).duplicates == 1
    engine.ack(engine.reserve_id(), result='"ok"')
    deliver(engine, path)
    assert engine.state(d) == "queued" and arrivals(engine, d)[1].kind == "s"


def test_arm_skips_a_node_not_cancelled_by_a_failure_or_with_another_token(
    engine: Engine, path: EdgePath
):
    x, d = failed_pair(engine, path)
    td = engine.token(d)
    before = engine.snapshot()
    assert rearm(engine, Rearm("arm", d, td + 1, ((1, 0),))) == [False]
    # A failed source: no arrival to replace, it would wait for nothing.
    assert rearm(engine, Rearm("arm", x, engine.token(x), ((1, 0),))) == [False]
    assert rearm(engine, Rearm("requeue", d, td)) == [False]  # cancelled, not failed
    assert rearm(engine, Rearm("arm", new_job_id(engine.queue), 0, ((1, 0),))) == [False]
    assert engine.snapshot() == before


def test_a_malformed_item_is_refused_before_anything_is_written(engine: Engine, path: EdgePath):
    x, d = failed_pair(engine, path)
    before = engine.snapshot()
    good: list[Arg] = ["requeue", x, engine.token(x), 0]
    bads: list[list[Arg]] = [
        ["arm", d, engine.token(d), 2, 1, 0],
        ["nope", d, 0, 0],
        ["arm", d, "t", 0],
    ]
    for bad in bads:
        call = ScriptCall(
            "wf_rearm",
            [
                engine.keys.base,
                engine.keys.failed,
                engine.keys.prios,
                engine.keys.stats,
                engine.keys.notify,
            ],
            [-1, *good, *bad],
        )
        with pytest.raises(redis.ResponseError, match="wf_rearm: bad item"):
            execute(engine.client, Command(call, lambda r: r))
    assert engine.snapshot() == before


def test_a_cancelled_node_is_kept_for_its_own_result_ttl(engine: Engine):
    own, default = new_job_id(engine.queue), new_job_id(engine.queue)
    nodes = [node(engine, job_id=own, ttl=30), node(engine, job_id=default, ttl=0)]
    assert add_nodes(engine, nodes) == []
    assert wf_cancel(engine, own, default) == Cancelled(cancelled=2, requested=0)
    assert 0 < engine.client.ttl(engine.keys.job(own)) <= 30
    assert 30 < engine.client.ttl(engine.keys.job(default)) <= 600
