"""Dependencies in Lua: a waiting job is released (or ended) exactly when its last input
ends, with what each input delivered, on the inline path (same queue, settled in the
input's own script) and on the outbox path (an outbox entry that ``dep_apply.lua`` applies).

``wf_nodes.lua`` writes the graphs (no canvas), ``include/ack_job.lua`` delivers a success,
``dep_apply.lua`` applies outbox entries, gates and outcomes (:mod:`tests.support.dependencies`).
"""

from __future__ import annotations

import pytest
import redis

from django_rqueue import LeaseLost
from django_rqueue.dependencies import Arrival, DependencyFailed, EdgePath
from django_rqueue.engine import commands, dependency_calls
from django_rqueue.engine.dependency_replies import Applied
from django_rqueue.engine.fields import JobFields
from django_rqueue.engine.keys import QueueKeys, new_job_id
from django_rqueue.engine.replies import Promoted
from django_rqueue.engine.run import execute
from django_rqueue.engine.scripts import load
from tests.support import transitions
from tests.support.dependencies import (
    ack,
    add_nodes,
    apply,
    arrivals,
    check_waiting,
    deliver,
    dependents,
    edge,
    fan_in,
    inputs,
    node,
    outbox,
    relay,
)
from tests.support.engine import PREFIX, Engine


def test_a_dependent_is_released_when_its_last_input_ends_and_not_before(
    engine: Engine, path: EdgePath
):
    (a, b), d = fan_in(engine, path, 2)
    assert engine.state(d) == "waiting"
    assert engine.zset(engine.keys.waiting) == {d: float("inf")}
    assert engine.job(d)[JobFields.INPUTS_MISSING] == "2"

    token_a = ack(engine, a, '"a"')
    if path == "o":  # nothing reached d yet: the entry waits for the relay
        assert arrivals(engine, d) == {}
        assert outbox(engine) == [(d, 1, f's{token_a}:"a"')]
    deliver(engine, path)
    assert arrivals(engine, d) == {1: Arrival("s", token_a, '"a"')}
    assert (engine.state(d), engine.job(d)[JobFields.INPUTS_MISSING]) == ("waiting", "1")
    assert engine.stats().get("released", 0) == 0

    token_b = ack(engine, b, '"b"')
    deliver(engine, path)
    assert engine.state(d) == "queued"
    assert engine.job(d)[JobFields.INPUTS_MISSING] == "0"
    assert arrivals(engine, d)[2] == Arrival("s", token_b, '"b"')
    assert engine.zset(engine.keys.waiting) == {}
    assert engine.stats()["released"] == 1
    assert inputs(engine, d) == ["a", "b"]
    engine.check_invariants()
    check_waiting(engine)
    assert engine.reserve_id() == d


def test_a_result_deleted_with_its_record_still_reaches_the_dependent(
    engine: Engine, path: EdgePath
):
    (a,), d = fan_in(engine, path, 1)
    ack(engine, a, '{"big": [1, 2]}', ttl=0)
    assert not engine.client.exists(engine.keys.job(a))
    deliver(engine, path)
    assert inputs(engine, d) == [{"big": [1, 2]}]
    assert engine.state(d) == "queued"


def test_a_count_only_edge_delivers_the_outcome_without_the_result(engine: Engine, path: EdgePath):
    d, a = new_job_id(engine.queue), new_job_id(engine.queue)
    nodes = [node(engine, job_id=a, nx=edge(d, 1, path, copy="c"))]
    nodes.append(node(engine, job_id=d, inputs=[a], run=True))
    add_nodes(engine, nodes)
    token = ack(engine, a, '"secret"')
    deliver(engine, path)
    assert arrivals(engine, d) == {1: Arrival("s", token, "")}
    assert engine.state(d) == "queued"


def test_an_ack_resent_after_a_lost_reply_delivers_once(engine: Engine, path: EdgePath):
    (a, b), d = fan_in(engine, path, 2)
    token = ack(engine, a, '"a"')
    transitions.ack(engine.client, engine.keys, a, token, '"a"', 600)  # read as applied
    assert len(outbox(engine)) == (1 if path == "o" else 0)
    deliver(engine, path)
    assert engine.job(d)[JobFields.INPUTS_MISSING] == "1"
    assert list(arrivals(engine, d)) == [1]


def test_a_stale_ack_delivers_nothing(engine: Engine, path: EdgePath):
    (a,), d = fan_in(engine, path, 1)
    assert engine.reserve_id(lease_ms=1) == a
    stale = engine.token(a)
    engine.client.zadd(engine.keys.reserved, {a: 0})
    assert engine.reclaim()[0] == 1  # requeued under a new token
    with pytest.raises(LeaseLost):
        transitions.ack(engine.client, engine.keys, a, stale, '"old"', 600)
    assert outbox(engine) == []
    assert arrivals(engine, d) == {}
    assert engine.state(d) == "waiting"
    token = ack(engine, a, '"new"')
    deliver(engine, path)
    assert arrivals(engine, d) == {1: Arrival("s", token, '"new"')}


def test_ack_and_reserve_hands_out_the_dependent_its_ack_released(engine: Engine):
    (a,), d = fan_in(engine, "i", 1)
    assert engine.reserve_id() == a
    stale, got = transitions.ack_and_reserve(
        engine.client, engine.keys, a, engine.token(a), '"a"', 600, lease_ms=60_000, worker_id="w"
    )
    assert stale is None
    assert [job_id for job_id, _fields in got.jobs] == [d]
    assert inputs(engine, d) == ["a"]
    assert engine.state(d) == "running"


def test_applying_the_same_outbox_entries_twice_is_applying_them_once(engine: Engine):
    (a, b), d = fan_in(engine, "o", 2)
    ack(engine, a, "1")
    ack(engine, b, "2")
    entries = outbox(engine)
    assert len(entries) == 2
    assert apply(engine, entries[:1]) == Applied(1, 0, 0, 0)
    waiting = engine.snapshot()
    assert apply(engine, entries[:1] * 2) == Applied(0, 2, 0, 0)  # d still waits for b
    assert engine.snapshot() == waiting
    assert engine.job(d)[JobFields.INPUTS_MISSING] == "1"
    assert apply(engine, entries) == Applied(1, 1, 1, 0)
    after = engine.snapshot()
    assert apply(engine, entries) == Applied(0, 2, 0, 0)
    assert apply(engine, entries[::-1]) == Applied(0, 2, 0, 0)
    assert engine.snapshot() == after
    assert engine.stats()["released"] == 1


def test_an_arrival_for_a_job_that_is_gone_or_not_waiting_changes_nothing(engine: Engine):
    gone = new_job_id(engine.queue)
    queued = engine.add()
    before = engine.snapshot()
    assert apply(engine, [(gone, 1, "s1:1"), (queued, 1, "s1:1")]) == Applied(0, 2, 0, 0)
    assert not engine.client.exists(engine.keys.job(gone))
    assert engine.snapshot() == before


@pytest.mark.parametrize("policy", ["cancel", "run"])
def test_a_failed_input_cancels_or_is_passed_when_the_last_input_arrives(
    engine: Engine, path: EdgePath, policy: str
):
    (a, b), d = fan_in(engine, path, 2, run=policy == "run")
    failure = Arrival("f", 3, '{"type": "builtins.ValueError", "message": "no"}', name="t.a")
    assert apply(engine, [(d, 1, failure.encode())]) == Applied(1, 0, 0, 0)
    assert engine.state(d) == "waiting"  # decided only when every input has arrived
    assert engine.job(d)[JobFields.INPUTS_FAILED] == "1"
    assert engine.reserve_id() == a  # (its final failure is step 4's; here, its arrival)
    ack(engine, b, '"b"')
    deliver(engine, path)
    if policy == "cancel":
        assert engine.state(d) == "cancelled"
        assert engine.job(d)[JobFields.CANCEL_REASON] == "dependency_failed"
        assert engine.stats()["depcancelled"] == 1
        assert engine.stats().get("released", 0) == 0
        assert 0 < engine.client.ttl(engine.keys.job(d)) <= 600
    else:
        assert engine.state(d) == "queued"
        assert inputs(engine, d) == [
            DependencyFailed(a, "t.a", "failed", "builtins.ValueError", "no"),
            "b",
        ]
    assert engine.zset(engine.keys.waiting) == {}
    engine.check_invariants()
    check_waiting(engine)


def test_a_cancel_cascades_down_a_chain_each_node_once(engine: Engine, path: EdgePath):
    chain = [new_job_id(engine.queue) for _ in range(4)]  # the head's input, then 3 nodes
    nodes = []
    for k in range(1, 4):
        nx = edge(chain[k + 1], 1, path) if k < 3 else ""
        nodes.append(node(engine, job_id=chain[k], inputs=[chain[k - 1]], nx=nx, name=f"n{k}"))
    add_nodes(engine, nodes)
    failure = Arrival("f", 1, "", name="head").encode()
    got = apply(engine, [(chain[1], 1, failure)])
    assert got == Applied(1, 0, 0, 1)
    if path == "o":  # one relay round per level
        for level in (2, 3):
            assert [d for d, _k, _v in outbox(engine)] == [chain[level]]
            relay(engine)
    assert outbox(engine) == []
    for k in range(1, 4):
        job = engine.job(chain[k])
        assert (job["s"], job[JobFields.CANCEL_REASON]) == ("cancelled", "dependency_failed")
    token = int(engine.job(chain[1])["token"])
    assert arrivals(engine, chain[2]) == {
        1: Arrival("c", token, name="n1", reason="dependency_failed")
    }
    assert arrivals(engine, chain[3])[1].name == "n2"
    assert engine.stats()["depcancelled"] == 3
    assert engine.zset(engine.keys.waiting) == {}
    engine.check_invariants()
    check_waiting(engine)


def test_a_long_cascade_is_bounded_per_script_and_finished_by_the_relay(engine: Engine):
    n = 1_100
    chain = [new_job_id(engine.queue) for _ in range(n + 1)]
    nodes = [
        node(engine, job_id=chain[k], inputs=[chain[k - 1]], nx=edge(chain[k + 1], 1, "i"))
        for k in range(1, n)
    ]
    nodes.append(node(engine, job_id=chain[n], inputs=[chain[n - 1]]))
    add_nodes(engine, nodes)
    assert apply(engine, [(chain[1], 1, "c1::1:x")]) == Applied(1, 0, 0, 1)
    # The head, then CASCADE_MAX (1000) inline settles; the rest went to the outbox.
    states = [engine.state(job_id) for job_id in chain[1:]]
    assert states.count("cancelled") == 1_001
    assert [(d, k) for d, k, _v in outbox(engine)] == [(chain[1_002], 1)]
    relay(engine)
    assert [engine.state(job_id) for job_id in chain[1:]] == ["cancelled"] * n
    assert engine.stats()["depcancelled"] == n
    assert outbox(engine) == []


def test_a_tombstone_accepts_only_a_later_run(engine: Engine):
    (a,), d = fan_in(engine, "o", 1)
    # What wf_rearm.lua leaves: input 1 not arrived, and only a token above 3 accepted.
    engine.client.hset(engine.keys.job(d), "i:1", "r3")
    assert apply(engine, [(d, 1, "s3:1"), (d, 1, "s2:1")]) == Applied(0, 2, 0, 0)
    assert engine.state(d) == "waiting"
    assert apply(engine, [(d, 1, "s4:1")]) == Applied(1, 0, 1, 0)
    assert inputs(engine, d) == [1]


def test_a_gate_holds_a_gated_source_until_it_opens(engine: Engine):
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
    assert now + 5_000 <= score[s] < deadline  # the grace, until the gate opens
    assert score[d] == deadline  # not a source: no gate
    assert apply(engine, [(s, 1, "s1:7")]) == Applied(1, 0, 0, 0)
    assert engine.state(s) == "waiting"  # its gate is still closed
    assert apply(engine, [(s, 0, "g0:")]) == Applied(1, 0, 1, 0)
    assert engine.state(s) == "queued"
    assert JobFields.GATE not in engine.job(s)
    assert apply(engine, [(s, 0, "g0:")]) == Applied(0, 1, 0, 0)


def test_the_gate_moves_the_waiting_score_to_the_dependency_deadline(engine: Engine):
    x, s = new_job_id(engine.queue), new_job_id(engine.queue)
    add_nodes(
        engine,
        [node(engine, job_id=s, inputs=[x], source=True)],
        mode="gated",
        deadline_ms=-1,
        grace_ms=5_000,
    )
    assert engine.zset(engine.keys.waiting)[s] < float("inf")
    apply(engine, [(s, 0, "g0:")])
    assert engine.zset(engine.keys.waiting) == {s: float("inf")}
    assert engine.job(s)[JobFields.INPUTS_MISSING] == "1"


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
    check_waiting(engine)
    before = engine.snapshot()
    assert add_nodes(engine, nodes) == [(0, "exists"), (1, "exists"), (2, "exists")]
    assert engine.snapshot() == before


def test_options_every_node_of_a_batch_shares_are_sent_once_and_applied_to_each(engine: Engine):
    ids = [new_job_id(engine.queue) for _ in range(3)]
    nodes = [node(engine, job_id=i, priority=5, group="g") for i in ids]
    call = dependency_calls.wf_nodes(engine.keys, nodes, mode="live", deadline_ms=-1)
    flat = call.args[4 : 4 + 2 * int(call.args[3])]
    shared = dict(zip(flat[::2], flat[1::2], strict=True))
    assert shared["prio"] == 5 and shared["group"] == "g"
    assert add_nodes(engine, nodes) == []
    for job_id in ids:
        assert (engine.job(job_id)["prio"], engine.job(job_id)["group"]) == ("5", "g")
    assert engine.client.lrange(engine.keys.group(5, "g"), 0, -1) == [i.encode() for i in ids]
    engine.check_invariants()


def test_a_released_dependent_waits_its_release_delay(engine: Engine, path: EdgePath):
    (a,), d = fan_in(engine, path, 1, extra={JobFields.RELEASE_DELAY: 60_000})
    ack(engine, a, "1")
    deliver(engine, path)
    assert engine.state(d) == "scheduled"
    due = engine.zset(engine.keys.delayed)[d]
    assert engine.now_ms() + 59_000 < due <= engine.now_ms() + 60_000
    assert int(engine.job(d)["due"]) == due


def test_a_dependent_whose_expiry_came_while_it_waited_expires_and_tells_its_own(
    engine: Engine, path: EdgePath
):
    a, d, e = (new_job_id(engine.queue) for _ in range(3))
    nodes = [
        node(engine, job_id=a, nx=edge(d, 1, path)),
        node(
            engine,
            job_id=d,
            inputs=[a],
            nx=edge(e, 1, path),
            name="t.d",
            extra={JobFields.EXPIRES_IN: 0},
        ),
        node(engine, job_id=e, inputs=[d], run=True),
    ]
    add_nodes(engine, nodes)
    ack(engine, a, "1")
    deliver(engine, path)
    job = engine.job(d)
    assert (job["s"], job[JobFields.CANCEL_REASON]) == ("cancelled", "expired")
    assert engine.stats()["expired"] == 1
    assert engine.state(e) == "queued"
    assert inputs(engine, e) == [DependencyFailed(d, "t.d", "expired", "", "expired")]


def test_a_finisher_that_ends_before_its_workflow_finished_marks_it_failed(engine: Engine):
    workflow = new_job_id(engine.queue)
    finisher = workflow + ".f"
    record = engine.keys.workflow(workflow)
    engine.client.hset(record, mapping={"st": "running", "t0": 1})
    add_nodes(engine, [node(engine, job_id=finisher, nx=dependents("w"), ttl=300)])
    ack(engine, finisher, "null")
    got = engine.job_like(record)
    assert (got["st"], got["lost"]) == ("failed", "1")
    assert 0 < engine.client.ttl(record) <= 300
    assert engine.stats()["wffailed"] == 1


def test_a_finisher_that_ends_after_its_workflow_finished_changes_nothing(engine: Engine):
    workflow = new_job_id(engine.queue)
    record = engine.keys.workflow(workflow)
    engine.client.hset(record, mapping={"st": "succeeded", "t0": 1})
    add_nodes(engine, [node(engine, job_id=workflow + ".f", nx=dependents("w"))])
    ack(engine, workflow + ".f", "null")
    assert engine.job_like(record) == {"st": "succeeded", "t0": "1"}
    assert "wffailed" not in engine.stats()


def test_promote_tells_the_poller_about_the_outbox_and_the_next_dependency_deadline(
    engine: Engine,
):
    def round_() -> Promoted:
        return execute(engine.client, commands.promote_round(engine.keys, 100))

    assert round_() == Promoted(0, -1, 0, -1)
    (a,), d = fan_in(engine, "o", 1)
    assert round_() == Promoted(0, -1, 0, -1)  # d waits, with no deadline
    ack(engine, a, "1")
    assert round_().outbox == 1
    relay(engine)
    assert round_().outbox == 0
    x, w = new_job_id(engine.queue), new_job_id(engine.queue)
    add_nodes(engine, [node(engine, job_id=w, inputs=[x])], deadline_ms=60_000)
    assert 59_000 < round_().next_deadline_ms <= 60_000
    engine.client.zadd(engine.keys.waiting, {w: 0})  # its deadline has passed
    assert round_().next_deadline_ms == 0


def test_a_waiting_job_holds_its_unique_key(engine: Engine):
    x, w = new_job_id(engine.queue), new_job_id(engine.queue)
    add_nodes(engine, [node(engine, job_id=w, inputs=[x])])
    engine.client.set(engine.keys.unique("once"), w)  # as a depends_on job with a key holds it
    outcome, holder, state = engine.enqueue(unique_key="once")
    assert (outcome, holder, state) == ("duplicate", w, "waiting")


@pytest.mark.parametrize("path", ["o", "i"], ids=["outbox", "inline-entry"])
def test_a_dependent_on_another_queue_is_reached_through_the_outbox(engine: Engine, path: EdgePath):
    """Each script touches its own queue's slot only (a Cluster refuses anything else): the
    input's script writes its queue's outbox, ``dep_apply.lua`` runs on the dependent's
    queue. An entry marked inline whose dependent is on another queue goes the same way."""
    other = Engine(engine.client, QueueKeys.of(PREFIX, "emails"), queue="emails")
    a, d = new_job_id(engine.queue), new_job_id(other.queue)
    add_nodes(engine, [node(engine, job_id=a, nx=edge(d, 1, path))])
    add_nodes(other, [node(other, job_id=d, inputs=[a])])
    token = ack(engine, a, '"a"')
    assert outbox(engine) == [(d, 1, f's{token}:"a"')]
    assert other.state(d) == "waiting"
    assert apply(other, outbox(engine)) == Applied(1, 0, 1, 0)
    assert other.state(d) == "queued"
    assert inputs(other, d) == ["a"]
    other.check_invariants()
    check_waiting(other)


@pytest.mark.parametrize(
    ("head", "node_args", "message"),
    [
        (["soon", -1, -1], [], "bad mode"),
        (["live", -5, -1], [], "bad deadline"),
        (["live", -1, -1], ["default:a", 1, "prio", 101], "bad priority"),
        (["live", -1, -1], ["default:a", 1, "delay", -5], "bad delay"),
        (["live", -1, -1], ["default:a", 2, "n", "x"], "bad field count"),
    ],
)
def test_wf_nodes_refuses_bad_arguments_before_writing_anything(
    engine: Engine, head: list[object], node_args: list[object], message: str
):
    good = node(engine, job_id=new_job_id(engine.queue))
    call = dependency_calls.wf_nodes(engine.keys, [good], mode="live", deadline_ms=-1)
    with pytest.raises(redis.ResponseError, match=message):
        load("wf_nodes")(engine.client, call.keys, [*head, *call.args[3:], *node_args])  # type: ignore[list-item]
    assert engine.snapshot() == {}


def test_dep_apply_refuses_arguments_that_are_not_triples(engine: Engine):
    with pytest.raises(redis.ResponseError, match="not triples"):
        load("dep_apply")(engine.client, [engine.keys.base], ["default:a", 1])
    with pytest.raises(redis.ResponseError, match="bad input index"):
        load("dep_apply")(engine.client, [engine.keys.base], ["default:a", "x", "s1:1"])
