"""Every way an input ends other than by an ack delivers its outcome once, after its last
attempt only: the final failure (``fail.lua``), the lost lease of a last attempt
(``reclaim.lua``), a corrupt record (``include/fail_corrupt.lua``); on the inline and the
outbox path."""

from __future__ import annotations

import json

from django_rqueue.dependencies import DependencyFailed, EdgePath
from django_rqueue.engine.fields import JobFields
from django_rqueue.engine.keys import new_job_id
from django_rqueue.execution import error_record
from tests.support.dependencies import (
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


def test_a_retry_is_not_an_end_only_the_final_failure_delivers(engine: Engine, path: EdgePath):
    (a,), d = fan_in(engine, path, 1, run=True)
    engine.client.hset(engine.keys.job(a), JobFields.MAX_ATTEMPTS, 2)
    assert engine.reserve_id() == a
    assert engine.fail(a, retry_ms=0)[0] == "retrying"
    assert outbox(engine) == []
    assert arrivals(engine, d) == {}
    assert engine.promote()[0] == 1
    assert engine.reserve_id() == a
    token = engine.token(a)
    error = error_record(RuntimeError("boom"), "Traceback: boom\n")
    assert engine.fail(a, retry_ms=0, error=error)[0] == "failed"
    deliver(engine, path)
    (arrival,) = arrivals(engine, d).values()
    assert (arrival.kind, arrival.token, arrival.name, arrival.body) == (
        "f",
        token,
        "tests.noop",
        error,
    )
    assert engine.state(d) == "queued"
    assert inputs(engine, d) == [
        DependencyFailed(a, "tests.noop", "failed", "builtins.RuntimeError", "boom")
    ]
    engine.check_invariants()
    check_waiting(engine)


def test_a_final_failure_cancels_down_the_chain(engine: Engine, path: EdgePath):
    a, b, c = (new_job_id(engine.queue) for _ in range(3))
    nodes = [
        node(engine, job_id=a, nx=edge(b, 1, path), extra={JobFields.MAX_ATTEMPTS: 1}),
        node(engine, job_id=b, inputs=[a], nx=edge(c, 1, path)),
        node(engine, job_id=c, inputs=[b]),
    ]
    add_nodes(engine, nodes)
    assert engine.reserve_id() == a
    assert engine.fail(a)[0] == "failed"
    deliver(engine, path)
    for job_id in (b, c):
        job = engine.job(job_id)
        assert (job["s"], job[JobFields.CANCEL_REASON]) == ("cancelled", "dependency_failed")
    assert engine.stats()["depcancelled"] == 2
    engine.check_invariants()
    check_waiting(engine)


def test_a_lost_last_attempt_delivers_its_failure_under_the_new_token(
    engine: Engine, path: EdgePath
):
    (a,), d = fan_in(engine, path, 1, run=True)
    engine.client.hset(engine.keys.job(a), JobFields.MAX_ATTEMPTS, 1)
    assert engine.reserve_id(lease_ms=1) == a
    lost = engine.token(a)
    engine.client.zadd(engine.keys.reserved, {a: 0})
    assert engine.reclaim()[:2] == (0, 1)
    deliver(engine, path)
    (arrival,) = arrivals(engine, d).values()
    assert (arrival.kind, arrival.token) == ("f", lost + 1)
    assert json.loads(arrival.body)["message"] == "lease expired"
    assert json.loads(arrival.body)["worker"] == "w1"
    assert engine.state(d) == "queued"


def test_a_lost_attempt_with_attempts_left_delivers_nothing(engine: Engine, path: EdgePath):
    (a,), d = fan_in(engine, path, 1)
    assert engine.reserve_id(lease_ms=1) == a
    engine.client.zadd(engine.keys.reserved, {a: 0})
    assert engine.reclaim()[:2] == (1, 0)
    assert outbox(engine) == []
    assert arrivals(engine, d) == {}


def test_a_corrupt_record_with_dependents_delivers_its_failure(engine: Engine, path: EdgePath):
    (a,), d = fan_in(engine, path, 1, run=True)
    engine.client.hdel(engine.keys.job(a), JobFields.STATE)  # no state: corrupt
    got = engine.reserve()
    assert engine.state(a) == "failed"
    # Inline, the reserve that failed it goes on and hands out the dependent it released.
    assert (got and got[0]) == (d if path == "i" else None)
    deliver(engine, path)
    (value,) = inputs(engine, d)
    assert isinstance(value, DependencyFailed)
    assert (value.job_id, value.status, value.error_type) == (a, "failed", "builtins.ValueError")
    assert value.message == 'job record is corrupt: it has no state (field "s")'
    assert engine.stats()["released"] == 1
