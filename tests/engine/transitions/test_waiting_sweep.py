"""The dependency deadline (``waiting_sweep.lua``): a waiting job past it ends cancelled
``dependency_timeout`` and tells its dependents (on the inline and the outbox path); a
standalone ``depends_on`` job whose gate never opened is aborted; anything else in
``waiting`` is left alone, and a second sweep changes nothing."""

from __future__ import annotations

import pytest

from django_rqueue.dependencies import Arrival, DependencyFailed, EdgePath
from django_rqueue.engine import dependency_commands
from django_rqueue.engine.dependency_replies import Swept
from django_rqueue.engine.fields import JobFields, StatsFields
from django_rqueue.engine.keys import new_job_id
from django_rqueue.engine.run import execute
from tests.support.dependencies import (
    add_nodes,
    arrivals,
    check_waiting,
    deliver,
    edge,
    inputs,
    node,
)
from tests.support.engine import Engine

TIMEOUT = "dependency_timeout"


def sweep(engine: Engine, limit: int = 100) -> Swept:
    return execute(engine.client, dependency_commands.waiting_sweep(engine.keys, limit))


def overdue(engine: Engine, path: EdgePath, **options: object) -> tuple[str, str]:
    """A job ``a`` waiting for an input ``x`` that never ends, its deadline passed, and its
    dependent ``d`` (policy "run", no deadline) waiting for ``a``."""
    a, d, x = (new_job_id(engine.queue) for _ in range(3))
    assert add_nodes(engine, [node(engine, job_id=d, inputs=[a], run=True)]) == []
    late = node(engine, job_id=a, inputs=[x], nx=edge(d, 1, path), name="t.a", **options)  # type: ignore[arg-type]
    assert add_nodes(engine, [late], deadline_ms=0) == []
    assert engine.state(a) == "waiting"
    return a, d


def test_a_job_past_its_dependency_deadline_is_cancelled_and_tells_its_dependent(
    engine: Engine, path: EdgePath
):
    a, d = overdue(engine, path)

    assert sweep(engine) == Swept(1, 0, -1)  # d waits without a deadline
    job = engine.job(a)
    assert job[JobFields.STATE] == "cancelled"
    assert job[JobFields.CANCEL_REASON] == TIMEOUT
    assert a not in engine.zset(engine.keys.waiting)
    assert engine.stats().get(StatsFields.DEPENDENCY_TIMEOUT) == 1
    deliver(engine, path)
    assert arrivals(engine, d) == {1: Arrival("c", 0, name="t.a", reason=TIMEOUT)}
    assert inputs(engine, d) == [DependencyFailed(a, "t.a", "cancelled", "", TIMEOUT)]
    assert engine.state(d) == "queued"
    assert sweep(engine) == Swept(0, 0, -1)  # a second sweep: nothing
    engine.check_invariants()
    check_waiting(engine)


def test_a_timed_out_job_cascades_to_dependents_that_cancel(engine: Engine, path: EdgePath):
    a, d, e, x = (new_job_id(engine.queue) for _ in range(4))
    later = [
        node(engine, job_id=e, inputs=[d]),
        node(engine, job_id=d, inputs=[a], nx=edge(e, 1, path)),  # policy "cancel"
    ]
    assert add_nodes(engine, later) == []
    late = node(engine, job_id=a, inputs=[x], nx=edge(d, 1, path))
    assert add_nodes(engine, [late], deadline_ms=0) == []

    assert sweep(engine).cancelled == 1
    deliver(engine, path)
    assert engine.job(d)[JobFields.CANCEL_REASON] == "dependency_failed"
    assert engine.job(e)[JobFields.CANCEL_REASON] == "dependency_failed"
    assert engine.zset(engine.keys.waiting) == {}
    check_waiting(engine)


def test_a_timed_out_job_without_a_result_ttl_is_deleted(engine: Engine, path: EdgePath):
    a, d = overdue(engine, path, ttl=0)

    assert sweep(engine).cancelled == 1
    assert not engine.client.exists(engine.keys.job(a))
    deliver(engine, path)
    assert engine.state(d) == "queued"


def test_a_standalone_job_whose_gate_never_opened_is_aborted(engine: Engine):
    parent, job = new_job_id(engine.queue), new_job_id(engine.queue)
    gated = node(engine, job_id=job, inputs=[parent], source=True)
    assert add_nodes(engine, [gated], mode="gated", grace_ms=0) == []
    assert JobFields.GATE in engine.job(job)

    assert sweep(engine) == Swept(0, 1, -1)
    assert not engine.client.exists(engine.keys.job(job))
    assert engine.zset(engine.keys.waiting) == {}
    assert StatsFields.DEPENDENCY_TIMEOUT not in engine.stats()
    engine.check_invariants()


@pytest.mark.parametrize("end", ["aborted", "cancelled"])
def test_a_swept_job_gives_its_unique_key_back(engine: Engine, end: str):
    job = new_job_id(engine.queue)
    if end == "aborted":
        late = node(engine, job_id=job, inputs=[new_job_id(engine.queue)], source=True)
        assert add_nodes(engine, [late], mode="gated", grace_ms=0) == []
    else:
        late = node(engine, job_id=job, inputs=[new_job_id(engine.queue)])
        assert add_nodes(engine, [late], deadline_ms=0) == []
    # As a depends_on job enqueued with using(unique_key=...) holds it.
    engine.client.hset(engine.keys.job(job), JobFields.UNIQUE_KEY, "k")
    engine.client.set(engine.keys.unique("k"), job)

    got = sweep(engine)

    assert (got.aborted, got.cancelled) == ((1, 0) if end == "aborted" else (0, 1))
    assert not engine.client.exists(engine.keys.unique("k"))


def test_a_gated_workflow_node_past_its_deadline_is_cancelled_not_aborted(engine: Engine):
    job = new_job_id(engine.queue)
    gated = node(engine, job_id=job, source=True, extra={JobFields.WORKFLOW: "default:w"})
    assert add_nodes(engine, [gated], mode="gated", grace_ms=0) == []

    assert sweep(engine) == Swept(1, 0, -1)
    assert engine.job(job)[JobFields.CANCEL_REASON] == TIMEOUT


def test_only_due_jobs_are_swept_a_batch_at_a_time_and_the_next_deadline_is_told(
    engine: Engine, path: EdgePath
):
    for _ in range(3):
        overdue(engine, path)
    later = node(engine, inputs=[new_job_id(engine.queue)])
    assert add_nodes(engine, [later], deadline_ms=60_000) == []

    assert sweep(engine, limit=2) == Swept(2, 0, 0)  # a full batch: more may be due
    got = sweep(engine, limit=2)
    assert got[:2] == (1, 0)
    assert 55_000 < got.next_deadline_ms <= 60_000
    assert engine.state(later.job_id) == "waiting"


def test_an_id_that_does_not_wait_any_more_only_leaves_waiting(engine: Engine):
    queued = engine.add()
    engine.client.zadd(engine.keys.waiting, {queued: 0, "default:gone": 0})

    assert sweep(engine) == Swept(0, 0, -1)
    assert engine.state(queued) == "queued"
    assert engine.zset(engine.keys.waiting) == {}
    assert StatsFields.DEPENDENCY_TIMEOUT not in engine.stats()


def test_a_bad_limit_is_refused(engine: Engine):
    with pytest.raises(Exception, match="bad limit"):
        sweep(engine, limit=0)


def test_a_record_that_is_not_a_hash_only_leaves_waiting(engine: Engine):
    corrupt = new_job_id(engine.queue)
    engine.client.set(engine.keys.job(corrupt), "not a hash")
    engine.client.zadd(engine.keys.waiting, {corrupt: 0})

    assert sweep(engine) == Swept(0, 0, -1)
    assert engine.zset(engine.keys.waiting) == {}
    assert engine.client.get(engine.keys.job(corrupt)) == b"not a hash"
