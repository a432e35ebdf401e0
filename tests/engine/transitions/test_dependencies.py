"""Dependencies in Lua: a waiting job is released (or ended) exactly when its last input
ends, with what each input delivered.

``wf_nodes.lua`` writes the graphs (no canvas), ``include/ack_job.lua`` delivers a success
(:mod:`tests.support.dependencies`).
"""

from __future__ import annotations

from django_rqueue import dependencies
from django_rqueue.engine.fields import JobFields
from django_rqueue.engine.keys import new_job_id
from tests.support import transitions
from tests.support.dependencies import add_nodes, edge, node
from tests.support.engine import Engine


def test_live_sources_run_now_and_a_resent_batch_writes_nothing(engine: Engine):
    d, a, b = (new_job_id(engine.queue) for _ in range(3))
    nodes = [
        node(engine, job_id=a, nx=edge(d, 1, "i"), priority=5, group="g"),
        node(engine, job_id=b, nx=edge(d, 2, "i"), delay_ms=60_000),
        node(engine, job_id=d, inputs=[a, b]),
    ]
    assert add_nodes(engine, nodes) == []
    assert (engine.state(a), engine.state(b), engine.state(d)) == ("queued", "scheduled", "waiting")
    assert engine.job(a)[JobFields.DEPENDENTS] == edge(d, 1, "i")
    assert engine.stats()["enqueued"] == 3
    engine.check_invariants()
    before = engine.snapshot()
    assert add_nodes(engine, nodes) == [(0, "exists"), (1, "exists"), (2, "exists")]
    assert engine.snapshot() == before


def test_a_gated_source_waits_for_its_gate_scored_by_the_grace(engine: Engine):
    x, s, d = (new_job_id(engine.queue) for _ in range(3))
    nodes = [
        node(engine, job_id=s, inputs=[x], nx=edge(d, 1, "i"), source=True),
        node(engine, job_id=d, inputs=[s]),
    ]
    now = engine.now_ms()
    assert add_nodes(engine, nodes, mode="gated", deadline_ms=60_000, grace_ms=5_000) == []
    job = engine.job(s)
    assert (job["s"], job[JobFields.INPUTS_MISSING]) == ("waiting", "2")
    deadline = int(job[JobFields.GATE])
    assert now + 60_000 <= deadline <= engine.now_ms() + 60_000
    score = engine.zset(engine.keys.waiting)
    assert now + 5_000 <= score[s] < deadline
    assert score[d] == deadline  # not a source: no gate
    assert JobFields.GATE not in engine.job(d)


def test_an_inline_dependent_is_released_by_its_last_inputs_ack(engine: Engine):
    d, a, b = (new_job_id(engine.queue) for _ in range(3))
    nodes = [
        node(engine, job_id=a, nx=edge(d, 1, "i")),
        node(engine, job_id=b, nx=edge(d, 2, "i")),
        node(engine, job_id=d, inputs=[a, b], shape="L"),
    ]
    add_nodes(engine, nodes)
    for job_id, result in ((a, '"a"'), (b, '"b"')):
        assert engine.state(d) == "waiting"
        assert engine.reserve_id() == job_id
        transitions.ack(engine.client, engine.keys, job_id, engine.token(job_id), result, 0)
    assert engine.state(d) == "queued"
    assert dependencies.inputs_of(engine.job_like(engine.keys.job(d))) == ["a", "b"]
    assert engine.stats()["released"] == 1
    engine.check_invariants()
