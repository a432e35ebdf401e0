"""An input that is cancelled, deleted, stopped or expires tells its dependents once, with
its reason (``cancel.lua`` through ``include/cancel_job.lua``, ``cancel_running.lua``,
``include/expire_if_due.lua`` at reserve and at promote, ``empty_queue.lua``); one that had
already ended (failed, succeeded) told them then, and tells them nothing more. On the
inline and the outbox path. A failed node of a workflow is retried by its workflow only
(``retry.lua`` refuses it, ``failed_batch.lua`` skips it)."""

from __future__ import annotations

import pytest

from django_rqueue import JobStateError
from django_rqueue.dependencies import Arrival, DependencyFailed, EdgePath
from django_rqueue.engine.fields import JobFields
from django_rqueue.engine.keys import new_job_id
from tests.support import transitions
from tests.support.dependencies import (
    ack,
    add_nodes,
    arrivals,
    check_waiting,
    deliver,
    edge,
    fan_in,
    inputs,
    node,
    outbox,
)
from tests.support.engine import Engine


def member(engine: Engine, path: EdgePath, state: str) -> tuple[str, str]:
    """A job ``a`` in ``state`` whose one dependent ``d`` (policy "run") waits for it."""
    a, d, x = (new_job_id(engine.queue) for _ in range(3))
    nodes = [node(engine, job_id=d, inputs=[a], run=True)]
    if state == "waiting":
        nodes.append(node(engine, job_id=a, inputs=[x], nx=edge(d, 1, path), name="t.a"))
    else:
        delay = 60_000 if state == "scheduled" else 0
        nodes.append(node(engine, job_id=a, nx=edge(d, 1, path), delay_ms=delay, name="t.a"))
    add_nodes(engine, nodes)
    assert engine.state(a) == state
    return a, d


@pytest.mark.parametrize("state", ["waiting", "scheduled", "queued"])
@pytest.mark.parametrize("mode", ["cancel", "delete"])
def test_a_pending_input_cancelled_or_deleted_tells_its_dependent(
    engine: Engine, path: EdgePath, state: str, mode: str
):
    a, d = member(engine, path, state)
    assert engine.cancel(a, mode=mode) == state  # type: ignore[arg-type]
    assert a not in engine.zset(engine.keys.waiting)
    deliver(engine, path)
    reason = "deleted" if mode == "delete" else ""
    assert arrivals(engine, d) == {1: Arrival("c", 0, name="t.a", reason=reason)}
    assert inputs(engine, d) == [DependencyFailed(a, "t.a", "cancelled", "", reason)]
    assert engine.state(d) == "queued"
    assert engine.client.exists(engine.keys.job(a)) == (mode == "cancel")
    engine.check_invariants()
    check_waiting(engine)


@pytest.mark.parametrize(
    ("end", "mode"),
    # (cancel refuses a succeeded job: test_cancel_retry.py)
    [("failed", "cancel"), ("failed", "delete"), ("succeeded", "delete")],
)
def test_an_input_that_had_ended_tells_nothing_more(
    engine: Engine, path: EdgePath, end: str, mode: str
):
    (a, _b), d = fan_in(engine, path, 2)
    engine.client.hset(engine.keys.job(a), JobFields.MAX_ATTEMPTS, 1)
    if end == "failed":
        assert engine.reserve_id() == a
        engine.fail(a)
    else:
        ack(engine, a, "1")
    deliver(engine, path)
    before = engine.job(d)
    assert arrivals(engine, d)[1].kind == end[0]
    engine.cancel(a, mode=mode)  # type: ignore[arg-type]
    assert outbox(engine) == []
    assert engine.job(d) == before


@pytest.mark.parametrize("by_workflow", [False, True])
def test_a_stopped_running_input_tells_its_dependent(
    engine: Engine, path: EdgePath, by_workflow: bool
):
    (a,), d = fan_in(engine, path, 1, run=True)
    assert engine.reserve_id() == a
    token = engine.token(a)
    assert engine.cancel(a) == "running"
    assert outbox(engine) == [] and arrivals(engine, d) == {}  # asked only: it still runs
    if by_workflow:
        engine.client.hset(engine.keys.job(a), JobFields.CANCEL_BY_WORKFLOW, 1)
    transitions.cancel_running(engine.client, engine.keys, a, token, ttl=0)
    assert not engine.client.exists(engine.keys.job(a))
    deliver(engine, path)
    reason = "workflow_cancelled" if by_workflow else ""
    assert arrivals(engine, d) == {1: Arrival("c", token, name="tests.noop", reason=reason)}
    assert engine.state(d) == "queued"
    # A stale stop (a resent one, after its reply was lost) tells nothing more.
    with pytest.raises(Exception, match="stale"):
        transitions.cancel_running(engine.client, engine.keys, a, token, ttl=0)
    assert outbox(engine) == []


def test_a_stop_asked_by_the_workflow_records_its_reason(engine: Engine):
    job_id = engine.add()
    assert engine.reserve_id() == job_id
    engine.cancel(job_id)
    engine.client.hset(engine.keys.job(job_id), JobFields.CANCEL_BY_WORKFLOW, 1)
    transitions.cancel_running(engine.client, engine.keys, job_id, engine.token(job_id), ttl=60)
    job = engine.job(job_id)
    assert (job["s"], job[JobFields.CANCEL_REASON]) == ("cancelled", "workflow_cancelled")


@pytest.mark.parametrize("where", ["reserve", "promote"])
def test_an_input_that_expires_tells_its_dependent(engine: Engine, path: EdgePath, where: str):
    a, d = new_job_id(engine.queue), new_job_id(engine.queue)
    delay = 60_000 if where == "promote" else 0
    nodes = [
        node(engine, job_id=a, nx=edge(d, 1, path), delay_ms=delay),
        node(engine, job_id=d, inputs=[a], run=True),
    ]
    add_nodes(engine, nodes)
    engine.client.hset(engine.keys.job(a), JobFields.EXPIRES, engine.now_ms() - 1)
    if where == "promote":
        engine.client.zadd(engine.keys.delayed, {a: 0})  # due now
        assert engine.promote()[0] == 0  # not promoted: expired (a released d is not counted)
    else:
        got = engine.reserve()
        # Inline, the same reserve goes on and hands out the dependent it released.
        assert (got and got[0]) == (d if path == "i" else None)
    deliver(engine, path)
    (arrival,) = arrivals(engine, d).values()
    assert (arrival.kind, arrival.reason) == ("c", "expired")
    assert inputs(engine, d) == [DependencyFailed(a, "tests.noop", "expired", "", "expired")]
    assert engine.stats()["expired"] == 1


def test_emptying_the_queue_tells_each_deleted_inputs_dependents(engine: Engine, path: EdgePath):
    (a, b), d = fan_in(engine, path, 2)
    other = engine.add()
    assert transitions.empty_queue(engine.client, engine.keys, 100)[0] == 3
    deliver(engine, path)
    assert [x.reason for x in arrivals(engine, d).values()] == ["deleted", "deleted"]
    job = engine.job(d)
    assert (job["s"], job[JobFields.CANCEL_REASON]) == ("cancelled", "dependency_failed")
    assert not engine.client.exists(engine.keys.job(other))
    engine.check_invariants()
    check_waiting(engine)


def test_a_failed_node_of_a_workflow_is_not_retried_on_its_own(engine: Engine):
    workflow = new_job_id(engine.queue)
    a = new_job_id(engine.queue)
    add_nodes(engine, [node(engine, job_id=a, extra={JobFields.WORKFLOW: workflow})])
    engine.client.hset(engine.keys.job(a), JobFields.MAX_ATTEMPTS, 1)
    assert engine.reserve_id() == a
    engine.fail(a)
    before = engine.snapshot()
    with pytest.raises(JobStateError, match=f"node of workflow {workflow}") as info:
        transitions.retry_failed(engine.client, engine.keys, a)
    assert info.value.state == "failed"
    assert engine.snapshot() == before


def test_retry_all_skips_the_failed_nodes_of_workflows(engine: Engine):
    member_id = new_job_id(engine.queue)
    add_nodes(engine, [node(engine, job_id=member_id, extra={JobFields.WORKFLOW: "default:W"})])
    plain = engine.add()
    for job_id in (member_id, plain):
        engine.client.hset(engine.keys.job(job_id), JobFields.MAX_ATTEMPTS, 1)
        assert engine.reserve_id() == job_id
        engine.fail(job_id)
    done, skipped, stale, scanned = transitions.failed_batch(
        engine.client, engine.keys, mode="retry", limit=10, offset=0, upto_ms=engine.now_ms()
    )
    assert (done, skipped, stale, scanned) == (1, 1, 0, 2)
    assert (engine.state(member_id), engine.state(plain)) == ("failed", "queued")
    done, skipped, _stale, _scanned = transitions.failed_batch(
        engine.client, engine.keys, mode="delete", limit=10, offset=0, upto_ms=engine.now_ms()
    )
    assert (done, skipped) == (1, 0)
    assert not engine.client.exists(engine.keys.job(member_id))
    engine.check_invariants()
    check_waiting(engine)
