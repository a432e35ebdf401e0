"""``dep_link.lua``: a dependent linked to a job that already exists (``depends_on``) hears
of its end exactly once, whether the job ends later (``next:<id>``, the ``+`` token) or had
ended already (settled at once, or the value handed back for the dependent's queue)."""

from __future__ import annotations

import pytest

from django_rqueue.dependencies import Arrival, DependencyFailed, EdgePath
from django_rqueue.engine import dependency_commands
from django_rqueue.engine.dependency_replies import Applied, Linked, LinkOutcome, linked
from django_rqueue.engine.fields import JobFields
from django_rqueue.engine.keys import new_job_id
from django_rqueue.engine.run import execute
from tests.support.dependencies import (
    ack,
    add_nodes,
    apply,
    arrivals,
    deliver,
    edge,
    inputs,
    node,
    outbox,
)
from tests.support.engine import Engine


def link(engine: Engine, job_id: str, entry: str, *, same_queue: bool = True) -> Linked:
    command = dependency_commands.dep_link(engine.keys, job_id, entry, same_queue=same_queue)
    return execute(engine.client, command)


def dependent(engine: Engine, *parents: str, run: bool = False) -> str:
    d = new_job_id(engine.queue)
    assert add_nodes(engine, [node(engine, job_id=d, inputs=parents, run=run, shape="L")]) == []
    return d


def test_a_dependent_linked_to_a_pending_job_hears_of_its_end_once(engine: Engine, path: EdgePath):
    c = engine.add()
    d = dependent(engine, c)
    entry = edge(d, 1, path)
    assert link(engine, c, entry) == Linked(LinkOutcome.LINKED)
    assert link(engine, c, entry) == Linked(LinkOutcome.LINKED)  # twice: delivered twice
    assert engine.job(c)[JobFields.DEPENDENTS] == "+"  # one token, however many links
    assert engine.lrange(engine.keys.next(c)) == [entry, entry]
    token = ack(engine, c, '"c"')
    assert not engine.client.exists(engine.keys.next(c))
    deliver(engine, path)
    assert arrivals(engine, d) == {1: Arrival("s", token, '"c"')}
    assert engine.state(d) == "queued"
    assert engine.stats()["released"] == 1
    assert inputs(engine, d) == ["c"]


def test_a_link_keeps_the_edges_written_at_creation(engine: Engine, path: EdgePath):
    c, d1 = new_job_id(engine.queue), new_job_id(engine.queue)
    add_nodes(
        engine,
        [node(engine, job_id=c, nx=edge(d1, 1, path)), node(engine, job_id=d1, inputs=[c])],
    )
    d2 = dependent(engine, c)
    link(engine, c, edge(d2, 1, path))
    assert engine.job(c)[JobFields.DEPENDENTS] == f"{edge(d1, 1, path)} +"
    ack(engine, c, "1")
    deliver(engine, path)
    assert (engine.state(d1), engine.state(d2)) == ("queued", "queued")


@pytest.mark.parametrize("end", ["succeeded", "failed", "cancelled"])
def test_a_dependent_linked_to_an_ended_job_on_its_queue_is_settled_at_once(
    engine: Engine, end: str
):
    c = engine.add(max_attempts=1)
    if end == "cancelled":
        engine.cancel(c)
    elif end == "succeeded":
        ack(engine, c, '"done"')
    else:
        assert engine.reserve_id() == c
        engine.fail(c)
    d = dependent(engine, c, run=True)
    assert link(engine, c, edge(d, 1, "i")) == Linked(LinkOutcome.SETTLED)
    assert engine.state(d) == "queued"
    (value,) = inputs(engine, d)
    if end == "succeeded":
        assert value == "done"
    else:
        assert isinstance(value, DependencyFailed)
        assert (value.job_id, value.status) == (c, end)
    assert not engine.client.exists(engine.keys.next(c))
    assert JobFields.DEPENDENTS not in engine.job(c)


def test_an_ended_job_hands_back_its_value_for_a_dependent_on_another_queue(engine: Engine):
    c = engine.add()
    ack(engine, c, "42")
    d = dependent(engine, c)
    got = link(engine, c, edge(d, 1, "o"), same_queue=False)
    assert got.outcome == LinkOutcome.ENDED and got.value is not None
    assert arrivals(engine, d) == {}
    assert outbox(engine) == []
    assert apply(engine, [(d, 1, got.value)]) == Applied(1, 0, 1, 0)
    assert inputs(engine, d) == [42]


def test_a_count_only_link_to_an_ended_job_delivers_no_result(engine: Engine):
    c = engine.add()
    ack(engine, c, '"secret"')
    d = dependent(engine, c)
    got = link(engine, c, edge(d, 1, "o", copy="c"), same_queue=False)
    assert got.value is not None and got.value.endswith(":")


def test_a_job_that_is_gone_cannot_be_waited_for(engine: Engine):
    c = engine.add()
    ack(engine, c, "1", ttl=0)
    d = dependent(engine, c)
    before = engine.snapshot()
    assert link(engine, c, edge(d, 1, "i")) == Linked(LinkOutcome.MISSING)
    assert link(engine, new_job_id(engine.queue), edge(d, 1, "i")) == Linked(LinkOutcome.MISSING)
    assert engine.snapshot() == before


def test_a_link_reply_this_version_does_not_know_is_an_error():
    assert linked([b"ended", b"s1:2"]) == Linked(LinkOutcome.ENDED, "s1:2")
    assert linked([b"linked"]) == Linked(LinkOutcome.LINKED)
    with pytest.raises(ValueError, match="later"):
        linked([b"later"])
