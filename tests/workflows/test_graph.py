"""The compiler (django_rqueue.workflows.graph): the nodes, edges, shapes, finisher, paths and
``wf_nodes.lua`` batches of a canvas, read back through django_rqueue.dependencies."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pytest_django.fixtures import Settings

from django_rqueue.conf import get_config
from django_rqueue.dependencies import Dependents
from django_rqueue.engine.fields import JobFields, WorkflowFields
from django_rqueue.engine.keys import QueueKeys, queue_of
from django_rqueue.enqueue import Plan
from django_rqueue.inputs import prepend
from django_rqueue.workflows import NO_TIMEOUT, chain, chord, graph, group
from django_rqueue.workflows.nodes import FINISHER_NAME, NodePlan, WorkflowPlan
from tests.workflows.conftest import DepPath
from tests.workflows.jobs import (
    anything,
    fetch,
    mail,
    noop,
    parse,
    report,
    singleton,
    store,
    summarize,
)

F = "F"
X_DEFAULT, X_EMAILS = "default:xxxxxxxxxxxxxxxxxxxxxx", "emails:yyyyyyyyyyyyyyyyyyyyyy"


def edges(plan: WorkflowPlan, node: NodePlan) -> list[tuple[str, str, int, object]]:
    """``node``'s decoded ``nx``: (copy, path, input index, dependent index or "F")."""
    index = {n.id: n.index for n in plan.nodes}
    decoded = Dependents.decode(str(node.fields[JobFields.DEPENDENTS]))
    return [
        (e.copy, e.path, e.index, F if e.dependent == plan.finisher.id else index[e.dependent])
        for e in decoded.edges
    ]


def field(node: NodePlan, name: str) -> object:
    return node.fields.get(name)


def test_a_chain_passes_each_result_to_the_next() -> None:
    plan = graph.compile(chain(fetch.s("u"), parse.s(), store.s()))
    a, b, c = plan.nodes
    assert edges(plan, a) == [("p", "i", 1, 1), ("c", "i", 1, F)]
    assert edges(plan, b) == [("p", "i", 1, 2), ("c", "i", 2, F)]
    assert edges(plan, c) == [("p", "i", 3, F)]  # the exit carries its result to F
    assert [n.source for n in plan.nodes] == [True, False, False]
    assert field(a, JobFields.INPUT_COUNT) is None and field(a, JobFields.PASS_SHAPE) is None
    assert (field(b, JobFields.INPUT_COUNT), field(b, JobFields.INPUT_IDS)) == (1, a.id)
    assert prepend(str(field(c, JobFields.PASS_SHAPE)), ["parsed"]) == "parsed"
    assert plan.edges == ((0, 1), (1, 2))
    assert plan.shape == 2


def test_the_finisher_waits_for_every_node_and_passes_the_workflows_result() -> None:
    plan = graph.compile(chain(fetch.s("u"), parse.s(), store.s()))
    f = plan.finisher
    assert f.id == plan.id + ".f" and f.queue == plan.home == queue_of(plan.id) == "default"
    assert f.fields[JobFields.NAME] == FINISHER_NAME
    assert f.fields[JobFields.WORKFLOW] == plan.id
    assert Dependents.decode(str(f.fields[JobFields.DEPENDENTS])).finisher
    assert f.fields[JobFields.INPUT_COUNT] == 3 and JobFields.INPUT_IDS not in f.fields
    assert f.fields[JobFields.ON_DEPENDENCY_FAILURE] == "r"
    assert prepend(str(f.fields[JobFields.PASS_SHAPE]), ["a", "b", "c"]) == "c"
    assert f.input_ids == tuple(n.id for n in plan.nodes) and not f.source
    assert all(n.fields[JobFields.WORKFLOW] == plan.id for n in plan.nodes)


def test_a_group_is_a_list_in_member_order() -> None:
    plan = graph.compile(group(fetch.s("a"), fetch.s("b"), fetch.s("c")))
    assert [edges(plan, n) for n in plan.nodes] == [[("p", "i", k, F)] for k in (1, 2, 3)]
    assert plan.finisher.fields[JobFields.PASS_SHAPE] == "L"
    assert all(n.source for n in plan.nodes) and plan.edges == ()
    single = graph.compile(group(fetch.s("a")))  # a group of one is still a list
    assert prepend(str(single.finisher.fields[JobFields.PASS_SHAPE]), ["r"]) == ["r"]


def test_a_chord_body_gets_the_list_of_the_header_results() -> None:
    plan = graph.compile(chord([fetch.s("a"), fetch.s("b")], summarize.s()))
    a, b, body = plan.nodes
    assert edges(plan, a) == [("p", "i", 1, 2), ("c", "i", 1, F)]
    assert edges(plan, b) == [("p", "i", 2, 2), ("c", "i", 2, F)]
    assert edges(plan, body) == [("p", "i", 3, F)]
    assert body.fields[JobFields.INPUT_IDS] == f"{a.id} {b.id}"
    assert prepend(str(body.fields[JobFields.PASS_SHAPE]), ["ra", "rb"]) == ["ra", "rb"]
    assert prepend(str(plan.finisher.fields[JobFields.PASS_SHAPE]), [1, 2, 3]) == 3


def test_nested_groups_give_a_nested_shape() -> None:
    plan = graph.compile(
        chain(fetch.s("a"), group(parse.s(), group(parse.s(), parse.s())), summarize.s())
    )
    last = plan.nodes[-1]
    assert last.fields[JobFields.INPUT_COUNT] == 3
    assert last.fields[JobFields.PASS_SHAPE] == "[1,[2,3]]"
    assert prepend(str(last.fields[JobFields.PASS_SHAPE]), ["x", "y", "z"]) == ["x", ["y", "z"]]
    # Every member of the group waits for the first node.
    assert [edges(plan, plan.nodes[0])[i][3] for i in range(3)] == [1, 2, 3]
    top = graph.compile(group(fetch.s("a"), group(fetch.s("b"), fetch.s("c"))))
    assert prepend(str(top.finisher.fields[JobFields.PASS_SHAPE]), [1, 2, 3]) == [1, [2, 3]]


def test_an_empty_group_gives_an_empty_list() -> None:
    plan = graph.compile(chord([], summarize.s()))
    (body,) = plan.nodes
    assert body.source and body.fields[JobFields.INPUT_COUNT] == 0  # it gets [] at once
    assert body.fields[JobFields.PASS_SHAPE] == "[]"
    empty = graph.compile(group())
    assert empty.nodes == () and empty.finisher.source and empty.home == "default"
    assert empty.finisher.fields[JobFields.INPUT_COUNT] == 0
    assert prepend(str(empty.finisher.fields[JobFields.PASS_SHAPE]), []) == []
    # After a node, an empty group still waits for it, and passes [].
    after = graph.compile(chain(fetch.s("a"), group(), summarize.s()))
    assert after.nodes[1].fields[JobFields.INPUT_COUNT] == 1
    assert after.nodes[1].fields[JobFields.PASS_SHAPE] == "[]"


def test_an_immutable_signature_records_its_inputs_but_gets_nothing() -> None:
    plan = graph.compile(chain(fetch.s("a"), fetch.si("b")))
    second = plan.nodes[1]
    assert second.fields[JobFields.INPUT_IDS] == plan.nodes[0].id
    assert JobFields.PASS_SHAPE not in second.fields
    assert second.args == ("b",)


def test_on_dependency_failure_run_is_written_only_on_nodes_with_inputs() -> None:
    plan = graph.compile(
        chain(
            fetch.s("a").using(on_dependency_failure="run"),
            parse.s().using(on_dependency_failure="run"),
        )
    )
    assert JobFields.ON_DEPENDENCY_FAILURE not in plan.nodes[0].fields
    assert plan.nodes[1].fields[JobFields.ON_DEPENDENCY_FAILURE] == "r"
    default = graph.compile(chain(fetch.s("a"), parse.s()))
    assert JobFields.ON_DEPENDENCY_FAILURE not in default.nodes[1].fields


def test_depends_on_inside_a_canvas_adds_inputs_after_the_workflows_own() -> None:
    plan = graph.compile(chain(fetch.s("a"), parse.s().using(depends_on=[X_DEFAULT])))
    a, b = plan.nodes
    assert b.fields[JobFields.INPUT_COUNT] == 2
    assert b.fields[JobFields.INPUT_IDS] == f"{a.id} {X_DEFAULT}"
    assert prepend(str(b.fields[JobFields.PASS_SHAPE]), ["ra", "rx"]) == "ra"
    (link,) = plan.links
    assert (link.parent, link.dependent, link.input_index, link.here) == (X_DEFAULT, b.id, 2, True)
    assert link.entry == f"pi2:{b.id}"
    assert plan.path == "live"
    assert json.loads(str(plan.record[WorkflowFields.SPEC]))["ext"] == [[X_DEFAULT, 1]]


def test_depends_on_another_queue_goes_through_the_outbox_and_stages_the_creation() -> None:
    plan = graph.compile(group(summarize.s().using(depends_on=[X_EMAILS], pass_results=True)))
    (node,) = plan.nodes
    (link,) = plan.links
    assert link.entry == f"po1:{node.id}" and not link.here and link.parent_queue == "emails"
    assert node.fields[JobFields.PASS_SHAPE] == "L"  # pass_results on a source with depends_on
    assert node.source and plan.path == "staged"
    # The parent is not written: the locations are the nodes' and the record's.
    assert plan.places == (("default",),)
    assert json.loads(str(plan.record[WorkflowFields.SPEC]))["locs"] == [["default"]]


@pytest.mark.parametrize(
    ("canvas", "home"),
    [
        (group(mail.s("a"), mail.s("b"), fetch.s("c")), "emails"),
        (chain(fetch.s("a"), mail.si("b")), "emails"),  # a tie: the last sink's queue
        (group(mail.s("a"), fetch.s("b")), "default"),
        (chain(mail.s("a"), fetch.si("b"), fetch.si("c"), mail.si("d")), "emails"),
        (group(mail.s("a"), fetch.s("b"), noop.si().using(queue="low")), "low"),
        # The only sink is on a queue that is not tied: the tied queue of the last node.
        (
            chain(
                mail.s("a"),
                mail.si("b"),
                fetch.si("c"),
                fetch.si("d"),
                noop.si().using(queue="low"),
            ),
            "default",
        ),
    ],
)
def test_the_home_queue_holds_most_nodes_ties_going_to_the_last_sink(
    canvas: Any, home: str
) -> None:
    plan = graph.compile(canvas)
    assert plan.home == home and queue_of(plan.id) == home and plan.finisher.queue == home


def test_edges_between_queues_go_through_the_outbox() -> None:
    plan = graph.compile(chain(fetch.s("a"), mail.s(), mail.si("b")))
    assert edges(plan, plan.nodes[0]) == [("p", "o", 1, 1), ("c", "o", 1, F)]
    assert edges(plan, plan.nodes[1]) == [("p", "i", 1, 2), ("c", "i", 2, F)]
    assert plan.path == "live"  # one Redis: one location, whatever the queues
    assert plan.places == (("default", "emails"),)


def test_force_outbox_puts_every_edge_on_the_outbox_and_stages(settings: Settings) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "WORKFLOW_FORCE_OUTBOX": True}
    plan = graph.compile(chain(fetch.s("a").using(depends_on=[X_DEFAULT]), parse.s()))
    assert edges(plan, plan.nodes[0]) == [("p", "o", 1, 1), ("c", "o", 1, F)]
    assert plan.links[0].entry.startswith("po1:") and not plan.links[0].here
    assert plan.path == "staged"
    assert [n.id for n in plan.gated] == [plan.nodes[0].id]


def test_the_same_chain_on_either_path(dep_path: DepPath) -> None:
    plan = graph.compile(chain(fetch.s("a"), parse.s()))
    path = "i" if dep_path == "inline" else "o"
    assert edges(plan, plan.nodes[0]) == [("p", path, 1, 1), ("c", path, 1, F)]
    assert edges(plan, plan.nodes[1]) == [("p", path, 2, F)]
    assert plan.path == ("live" if dep_path == "inline" else "staged")


def test_queues_on_two_servers_stage_the_creation(other_redis_server: object) -> None:
    plan = graph.compile(group(fetch.s("a"), mail.s("b")))
    assert plan.path == "staged" and len(plan.places) == 2


def test_more_nodes_than_one_multi_holds_stage_the_creation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("django_rqueue.workflows.graph.ATOMIC_MAX_NODES", 2)
    assert graph.compile(group(noop.si(), noop.si())).path == "live"
    assert graph.compile(group(noop.si(), noop.si(), noop.si())).path == "staged"


def test_node_fields_are_those_of_delay() -> None:
    plan = graph.compile(chain(fetch.s("u").using(priority=7, timeout=9), parse.s(strict=True)))
    a, b = plan.nodes
    reference = Plan.of(fetch.using(priority=7, timeout=9), get_config())
    for name, value in reference.record.items():
        assert a.fields[name] == value
    expected = reference.submission(("u",), {}).payload
    assert a.fields[JobFields.PAYLOAD] == expected and (a.priority, a.queue) == (7, "default")
    assert json.loads(str(b.fields[JobFields.PAYLOAD])) == {"a": [], "k": {"strict": True}}


def test_a_delay_counts_from_the_release_on_a_waiting_node() -> None:
    plan = graph.compile(chain(fetch.s("a").using(delay=2), parse.s().using(delay=5)))
    a, b = plan.nodes
    assert a.delay_ms == 2000 and JobFields.RELEASE_DELAY not in a.fields
    assert b.delay_ms == 0 and b.fields[JobFields.RELEASE_DELAY] == 5000
    waits = graph.compile(group(fetch.s("a").using(depends_on=[X_DEFAULT], delay=3)))
    (node,) = waits.nodes
    assert node.source and node.delay_ms == 0 and node.fields[JobFields.RELEASE_DELAY] == 3000


@pytest.mark.parametrize(
    ("timeout", "setting", "deadline_ms"),
    [
        (None, 7 * 86400, 7 * 86400 * 1000),
        (60, 7 * 86400, 60_000),
        (NO_TIMEOUT, 10, -1),
        (None, None, -1),
    ],
)
def test_the_dependency_deadline(
    settings: Settings, timeout: Any, setting: Any, deadline_ms: int
) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "WORKFLOW_DEPENDENCY_TIMEOUT": setting}
    canvas = chain(fetch.s("a"), parse.s())
    if timeout is not None:
        canvas = canvas.using(dependency_timeout=timeout)
    plan = graph.compile(canvas)
    assert plan.deadline_ms == deadline_ms
    dto = plan.record.get(WorkflowFields.DEPENDENCY_TIMEOUT)
    assert dto == (None if deadline_ms < 0 else deadline_ms / 1000)


def test_the_record_and_its_spec() -> None:
    plan = graph.compile(chord([fetch.s("a"), mail.s("b")], summarize.s()))
    record = plan.record
    assert record[WorkflowFields.NODE_COUNT] == 3 and record[WorkflowFields.GENERATION] == 0
    assert record[WorkflowFields.NAME] == summarize.name
    spec = json.loads(str(record[WorkflowFields.SPEC]))
    assert spec["nodes"] == [[n.id, n.name] for n in plan.nodes]
    assert spec["edges"] == [[0, 2], [1, 2]] and spec["exits"] == [2] and spec["shape"] == 2
    assert spec["locs"] == [["default", "emails"]] and spec["ext"] == []
    assert WorkflowFields.CALLBACKS not in record


def test_callbacks_are_checked_with_the_workflow_id_first() -> None:
    canvas = chain(fetch.s("a")).on_error(mail.s().using(priority=5)).on_complete(noop.si())
    callbacks = json.loads(str(graph.compile(canvas).record[WorkflowFields.CALLBACKS]))
    assert callbacks["e"] == {"n": mail.name, "p": "[]", "i": 0, "o": {"priority": 5}}
    assert callbacks["c"] == {"n": noop.name, "p": "[]", "i": 1, "o": {}}
    with pytest.raises(TypeError, match="on_error"):
        graph.compile(chain(fetch.s("a")).on_error(mail.s("to")))  # the id would be a 2nd argument
    with pytest.raises(ValueError, match="on_complete"):
        graph.compile(chain(fetch.s("a")).on_complete(noop.si().using(job_id="x")))


def test_batches_follow_the_wf_nodes_layout() -> None:
    plan = graph.compile(chain(group(*(noop.si() for _ in range(5))), mail.si("x")))
    batches = list(plan.batches(size=2))
    assert [(b.queue, _count(b.call.args)) for b in batches] == [
        ("default", 2),
        ("default", 2),
        ("default", 1),
        ("emails", 1),
        (plan.home, 1),
    ]
    keys = QueueKeys.of("rqueue", "default")
    assert tuple(batches[0].call.keys) == (
        keys.base,
        keys.prios,
        keys.delayed,
        keys.stats,
        keys.notify,
        keys.wake,
        keys.waiting,
    )
    assert batches[0].call.args[:3] == ["live", 7 * 86400 * 1000, -1]
    assert batches[-1].call.args[:3] == ["live", -1, -1]  # the finisher waits however long
    decoded = [node for b in batches for node in _nodes(b.call.args)]
    for node, (job_id, prio, grp, delay, run_at, fields) in zip(
        (*plan.nodes, plan.finisher), decoded, strict=True
    ):
        assert (job_id, prio, grp, delay, run_at) == (
            node.id,
            node.priority,
            node.group,
            node.delay_ms,
            node.run_at_ms,
        )
        expected = {k: str(v) for k, v in node.fields.items()}
        if node.source:
            expected["src"] = "1"
        assert fields == expected


def test_a_staged_plan_gates_its_batches(settings: Settings) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "WORKFLOW_FORCE_OUTBOX": True}
    assert {b.call.args[0] for b in graph.compile(chain(fetch.s("a"))).batches()} == {"gated"}


@pytest.mark.parametrize(
    ("canvas", "error", "words"),
    [
        (chain(fetch.s("a").using(unique_key="k")), ValueError, "unique_key"),
        (chain(singleton.si()), ValueError, "unique_key"),
        (chain(fetch.s("a").using(job_id="mine")), ValueError, "job_id"),
        (chain(fetch.s("a").using(on_commit=False)), ValueError, "on_commit"),
        (chain(fetch.s("a").using(dependency_timeout=5)), ValueError, "dependency_timeout"),
        (chain(fetch.s("a"), parse.s().using(pass_results=True)), ValueError, "pass_results"),
        (chain(fetch.s("a").using(pass_results=True)), ValueError, "pass_results"),
        (chain(fetch.s("a"), chain(parse.s()).on_error(noop.si())), ValueError, "outermost"),
        (
            chain(fetch.s("a"), group(parse.s()).using(dependency_timeout=3)),
            ValueError,
            "outermost",
        ),
        (chain(fetch.s("a").using(queue="nowhere")), ValueError, "workflow node 0 .*not declared"),
        (chain(fetch.s("a").using(depends_on=["nowhere:x"])), ValueError, "not declared"),
        (chain(fetch.s("a"), parse.s("t", "u")), TypeError, "workflow node 1"),
        (chain(parse.s()), TypeError, "workflow node 0"),
        (chain(report.s(title="t")), TypeError, "results"),
        (chain(fetch.s(object())), TypeError, "JSON"),
        (chain(fetch.s("a"), anything.s(object())), TypeError, "workflow node 1"),
    ],
)
def test_invalid_nodes_are_refused_naming_the_node(canvas: Any, error: type, words: str) -> None:
    with pytest.raises(error, match=words):
        graph.compile(canvas)


def test_arguments_over_the_payload_limit_are_refused(settings: Settings) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "MAX_PAYLOAD_BYTES": 50}
    with pytest.raises(ValueError, match="workflow node 1 .*MAX_PAYLOAD_BYTES"):
        graph.compile(chain(fetch.s("a"), parse.s(strict="x" * 60)))


def test_compile_takes_elements_only() -> None:
    with pytest.raises(TypeError, match="a workflow is"):
        graph.compile(fetch)


def _count(argv: list[Any]) -> int:
    return len(_nodes(argv))


def _nodes(argv: list[Any]) -> list[tuple[Any, ...]]:
    """The nodes of one batch's ARGV, as (id, prio, group, delay, run_at, fields): the
    shared pairs (``ARGV[4]``), then each node's own; the instructions read out."""
    shared_flat = argv[4 : 4 + 2 * argv[3]]
    shared = {str(k): str(v) for k, v in zip(shared_flat[::2], shared_flat[1::2], strict=True)}
    found, i = [], 4 + 2 * argv[3]
    while i < len(argv):
        job_id, count = argv[i : i + 2]
        flat = argv[i + 2 : i + 2 + 2 * count]
        own = {str(k): str(v) for k, v in zip(flat[::2], flat[1::2], strict=True)}
        fields = {**shared, **own}
        prio = int(fields.pop("prio", 0))
        grp = fields.pop("group", "")
        delay = int(fields.pop("delay", 0))
        run_at = int(fields.pop("run_at", -1))
        found.append((job_id, prio, grp, delay, run_at, fields))
        i += 2 + 2 * count
    return found
