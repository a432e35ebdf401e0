"""Workflows and ``depends_on`` under ``RQUEUE["EAGER"]``: run inline, in topological order,
with the policies of the Lua side, and nothing sent to Redis.

Redis is made unusable for every test (``REDIS_URL`` names a port nothing listens on), so
any read or write raises; the session server is also checked to stay empty.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.db import transaction
from pytest_django.fixtures import Settings

from django_rqueue import eager_outcomes, signals
from django_rqueue.engine.connection import reset_clients
from django_rqueue.enqueue import write
from django_rqueue.exceptions import JobStateError, RedisUnavailable, WorkflowStateError
from django_rqueue.job import CancelReason, JobStatus
from django_rqueue.workflows import (
    DependencyFailed,
    Workflow,
    WorkflowState,
    chain,
    chord,
    get_workflow,
    group,
)
from django_rqueue.workflows.eager import EagerWorkflow
from tests.conftest import Event
from tests.jobs_app.jobs import fail_then_succeed, read_ledger
from tests.workflows.jobs import (
    add,
    collect,
    double,
    explode,
    fetch_async,
    inputs_seen,
    note,
    report,
    summarize,
    triple_async,
)

#: A Redis URL nothing answers on: any command raises.
NOWHERE = "redis://127.0.0.1:1/0"

#: Both edge paths compile differently (inline edges and one MULTI, or outbox edges and a
#: staged creation); under EAGER neither may matter.
pytestmark = pytest.mark.usefixtures("dep_path")


@pytest.fixture(autouse=True)
def eager(
    settings: Settings, rqueue_redis: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """EAGER on, Redis unusable (a write would raise within a second), the real server left
    empty; yields the real server's URL."""
    real = settings.RQUEUE["REDIS_URL"]
    settings.RQUEUE = {**settings.RQUEUE, "EAGER": True, "REDIS_URL": NOWHERE}
    monkeypatch.setattr(write, "ENQUEUE_PATIENCE", 0.5)
    reset_clients()
    yield real
    reset_clients()
    assert rqueue_redis.dbsize() == 0


@pytest.fixture
def finished() -> Iterator[list[tuple[Workflow, WorkflowState]]]:
    """Every ``workflow_finished`` sent during the test: ``(workflow, state)``."""
    seen: list[tuple[Workflow, WorkflowState]] = []

    def receiver(sender: object, workflow: Workflow, state: WorkflowState, **_: Any) -> None:
        assert sender is Workflow
        seen.append((workflow, state))

    signals.workflow_finished.connect(receiver, weak=False)
    try:
        yield seen
    finally:
        signals.workflow_finished.disconnect(receiver)


def statuses(wf: Workflow) -> list[JobStatus]:
    return [j.status for j in wf.jobs]


def test_redis_is_really_unusable_here():
    with pytest.raises(RedisUnavailable):
        get_workflow("default:x")


# -- results ------------------------------------------------------------------------------


def test_a_chain_passes_each_result_first_and_returns_the_finished_handle(
    finished: list[tuple[Workflow, WorkflowState]],
):
    wf = chain(add.s(1, 2), double.s(), inputs_seen.s("x")).delay()

    assert isinstance(wf, EagerWorkflow)
    assert wf.state is WorkflowState.SUCCEEDED
    assert wf.result == {"args": [6, "x"], "inputs": [6], "workflow": wf.id}
    assert statuses(wf) == [JobStatus.SUCCEEDED] * 3
    assert [j.result for j in wf.jobs] == [3, 6, wf.result]
    assert [j.id for j in wf.jobs] == wf.node_ids
    assert all(j.workflow_id == wf.id for j in wf.jobs)
    assert wf.finished_at is not None
    assert finished == [(wf, WorkflowState.SUCCEEDED)]
    assert wf.wait(1) is wf
    assert asyncio.run(wf.await_(1)) is wf
    wf.refresh()  # reads nothing
    assert wf.state is WorkflowState.SUCCEEDED


def test_si_ignores_the_result_which_stays_readable_from_the_context():
    wf = chain(add.s(1, 2), inputs_seen.si("own")).delay()

    assert wf.result == {"args": ["own"], "inputs": [3], "workflow": wf.id}


def test_a_tuple_or_dict_result_is_one_value():
    wf = chain(collect.s([1], 2), inputs_seen.s(), inputs_seen.s()).delay()

    first = {"args": [[1, 2]], "inputs": [[1, 2]], "workflow": wf.id}
    assert wf.result["args"] == [first]


def test_a_group_gives_a_list_in_member_order_and_a_group_of_one_is_a_list():
    assert group(add.s(1, 1), add.s(2, 2).using(queue="emails"), double.s(5)).delay().result == [
        2,
        4,
        10,
    ]
    assert group(double.s(4)).delay().result == [8]


def test_an_empty_group_finishes_at_once_and_a_chord_without_header_gets_an_empty_list(
    finished: list[tuple[Workflow, WorkflowState]],
):
    empty = group().delay()
    assert (empty.state, empty.result, empty.jobs) == (WorkflowState.SUCCEEDED, [], [])
    assert chord([], collect.s("end")).delay().result == ["end"]
    assert chord([double.s(2)], collect.s()).delay().result == [4]
    assert chain(add.s(1, 1), group(), collect.s()).delay().result == []
    assert [state for _, state in finished] == [WorkflowState.SUCCEEDED] * 4


def test_nested_shapes_run_each_body_once_with_the_right_value():
    inner = chord([add.s(1, 1), add.s(2, 2)], summarize.s())
    wf = chord(
        [inner, chain(double.s(3), double.s()), group(add.s(0, 1), add.s(0, 2))], collect.s()
    )
    assert wf.delay().result == [2, 12, [1, 2]]

    # a chain of groups: the second group's members each get the first group's list
    wf2 = chain(group(add.s(1, 1), add.s(2, 2)), group(collect.s("a"), collect.s("b"))).delay()
    assert wf2.result == [[2, 4, "a"], [2, 4, "b"]]
    assert len(wf2.jobs) == 4

    # a group inside a chain inside a chord's header
    wf3 = chord([chain(add.s(1, 2), group(double.s(), double.s()))], collect.s()).delay()
    assert wf3.result == [[6, 6]]


def test_a_context_node_gets_its_context_first_then_the_result():
    wf = chain(group(add.s(1, 1), add.s(2, 2)), report.s("title")).delay()

    assert wf.result == "title"
    assert wf.jobs[-1].inputs is not None and wf.jobs[-1].inputs.values() == [2, 4]


def test_an_async_node_gets_the_result_first_too():
    wf = chain(add.s(1, 1), triple_async.s(), fetch_async.si("u")).delay()

    assert [j.result for j in wf.jobs] == [2, 6, "u"]


# -- policies -----------------------------------------------------------------------------


def test_a_failure_cancels_what_follows_siblings_still_run_and_on_error_runs_once(
    finished: list[tuple[Workflow, WorkflowState]], events: list[Event]
):
    header = [explode.s(1), add.s(2, 2)]
    wf = (
        chain(chord(header, collect.s()), double.s(), double.s())
        .on_error(note.s("failed"))
        .on_complete(note.si("done"))
        .delay()
    )

    assert wf.state is WorkflowState.FAILED and wf.result is None
    assert statuses(wf) == [
        JobStatus.FAILED,
        JobStatus.SUCCEEDED,
        JobStatus.CANCELLED,
        JobStatus.CANCELLED,
        JobStatus.CANCELLED,
    ]
    assert [j.cancel_reason for j in wf.jobs[2:]] == [CancelReason.DEPENDENCY_FAILED] * 3
    assert finished == [(wf, WorkflowState.FAILED)]
    callbacks = [(e[2]["job"].id, e[2]["result"]) for e in events if e[0] == "job_succeeded"]
    random_part = wf.id.partition(":")[2]
    assert callbacks[-2:] == [
        (f"default:{random_part}.e0", [wf.id, "failed"]),
        (f"default:{random_part}.c0", ["done"]),
    ]
    # the nodes were created, not enqueued (as live); the callbacks were enqueued
    enqueued = [e[2]["job"].id for e in events if e[0] == "job_enqueued"]
    assert enqueued == [f"default:{random_part}.e0", f"default:{random_part}.c0"]


def test_on_complete_runs_on_success_and_on_error_does_not(events: list[Event]):
    wf = chain(add.s(1, 1)).on_error(note.s("e")).on_complete(note.s("c")).delay()

    ran = [e[2]["result"] for e in events if e[0] == "job_succeeded"]
    assert ran == [2, [wf.id, "c"]]


def test_a_run_node_gets_dependency_failed_in_place_of_the_result():
    wf = chain(
        group(explode.s(7), add.s(1, 1)),
        collect.s().using(on_dependency_failure="run"),
        double.si(4),
    ).delay()

    first = wf.jobs[0]
    failed = DependencyFailed(first.id, explode.name, "failed", "builtins.RuntimeError", "boom 7")
    assert wf.jobs[2].result == [repr(failed), 2]
    assert wf.jobs[2].inputs is not None and wf.jobs[2].inputs.values() == [failed, 2]
    # the run node succeeded, but the failed node still fails the workflow
    assert statuses(wf)[2:] == [JobStatus.SUCCEEDED, JobStatus.SUCCEEDED]
    assert wf.state is WorkflowState.FAILED


def test_a_run_node_after_a_cancelled_one_gets_its_cancel():
    wf = chain(explode.s(), double.s(), inputs_seen.s().using(on_dependency_failure="run")).delay()

    cancelled = DependencyFailed(wf.jobs[1].id, double.name, "cancelled", "", "dependency_failed")
    assert wf.jobs[2].result["args"] == [repr(cancelled)]


def test_a_node_with_retries_left_does_not_settle_before_its_last_attempt(ledger: str):
    wf = chain(fail_then_succeed.s(ledger, "f", 2), double.s()).delay()

    assert wf.result == 6 and wf.jobs[0].attempts == 3
    assert len(read_ledger(ledger)) == 3


def test_eager_propagate_raises_the_first_failure_and_runs_nothing_after_it(
    settings: Settings, finished: list[tuple[Workflow, WorkflowState]], events: list[Event]
):
    settings.RQUEUE = {**settings.RQUEUE, "EAGER_PROPAGATE": True}

    with pytest.raises(RuntimeError, match="boom 1"):
        chain(group(explode.s(1), add.s(5, 5)), collect.s()).on_complete(note.s()).delay()

    started = [e[2]["job"].name for e in events if e[0] == "job_started"]
    assert started == [explode.name]
    assert finished == []


# -- the handle ---------------------------------------------------------------------------


def test_the_handle_cannot_be_cancelled_and_retries_only_a_failed_workflow():
    wf = chain(explode.s()).delay()

    with pytest.raises(WorkflowStateError, match="inline") as caught:
        wf.cancel()
    assert (caught.value.workflow_id, caught.value.state) == (wf.id, "failed")
    ok = chain(add.s(1, 1)).delay()
    with pytest.raises(WorkflowStateError, match="it is succeeded"):
        ok.retry_failed()


def test_retry_failed_reruns_the_failed_nodes_and_what_they_cancelled_only(
    ledger: str, finished: list[tuple[Workflow, WorkflowState]], events: list[Event]
):
    wf = (
        chain(
            group(fail_then_succeed.s(ledger, "f", 3), add.s(1, 1)),
            collect.s(),
            collect.s("end"),
        )
        .on_error(note.s("e"))
        .on_complete(note.si("c"))
        .delay()
    )
    assert statuses(wf) == [
        JobStatus.FAILED,
        JobStatus.SUCCEEDED,
        JobStatus.CANCELLED,
        JobStatus.CANCELLED,
    ]
    sibling = wf.jobs[1].finished_at

    wf.retry_failed()

    assert wf.state is WorkflowState.SUCCEEDED and wf.generation == 1
    assert wf.result == [4, 2, "end"]  # run 4 of fail_then_succeed returned 4
    assert statuses(wf) == [JobStatus.SUCCEEDED] * 4
    assert wf.jobs[0].attempts == 1 and wf.jobs[1].finished_at == sibling  # not re-run
    assert [state for _, state in finished] == [WorkflowState.FAILED, WorkflowState.SUCCEEDED]
    random_part = wf.id.partition(":")[2]
    callbacks = [e[2]["job"].id for e in events if e[0] == "job_succeeded"]
    assert [c for c in callbacks if random_part in c] == [
        f"default:{random_part}.e0",
        f"default:{random_part}.c0",
        f"default:{random_part}.c1",
    ]
    with pytest.raises(WorkflowStateError, match="succeeded"):
        wf.retry_failed()


@pytest.mark.django_db(transaction=True)
def test_inside_atomic_it_runs_at_once_as_an_eager_job_does():
    with transaction.atomic():
        wf = chain(add.s(1, 2), double.s()).delay()
        assert wf.result == 6


def test_get_workflow_reads_redis_where_an_eager_workflow_never_is(settings: Settings, eager: str):
    wf = chain(add.s(1, 2)).delay()

    settings.RQUEUE = {**settings.RQUEUE, "REDIS_URL": eager}  # a Redis that answers
    assert get_workflow(wf.id) is None


# -- depends_on ---------------------------------------------------------------------------


def test_depends_on_parents_that_ran_eagerly_runs_at_once_with_their_values(events: list[Event]):
    a, b = add.delay(1, 2), double.delay(5)

    d = collect.using(depends_on=[a, b], pass_results=True).delay("end")  # type: ignore[arg-type]  # results first
    plain = inputs_seen.using(depends_on=[a.id]).delay("x")

    assert (d.status, d.result) == (JobStatus.SUCCEEDED, [3, 10, "end"])
    assert plain.result == {"args": ["x"], "inputs": [3], "workflow": None}
    assert [e[2]["job"].id for e in events if e[0] == "job_enqueued"][-2:] == [d.id, plain.id]


def test_depends_on_a_failed_parent_cancels_or_runs_by_the_policy(events: list[Event]):
    bad = explode.delay("p")

    cancelled = double.using(depends_on=[bad], pass_results=True).delay()  # type: ignore[call-arg]  # results first
    ran = collect.using(depends_on=[bad], pass_results=True, on_dependency_failure="run").delay()  # type: ignore[call-arg]  # results first

    assert cancelled.status is JobStatus.CANCELLED
    assert cancelled.cancel_reason is CancelReason.DEPENDENCY_FAILED
    assert cancelled.id in [e[2]["job"].id for e in events if e[0] == "job_enqueued"]
    failed = DependencyFailed(bad.id, explode.name, "failed", "builtins.RuntimeError", "boom 'p'")
    assert ran.result == [repr(failed)]
    # a cancelled dependent is a parent too: its own dependents hear of it
    after = collect.using(depends_on=[cancelled], pass_results=True, on_dependency_failure="run")
    reason = DependencyFailed(cancelled.id, double.name, "cancelled", "", "dependency_failed")
    assert after.delay().result == [repr(reason)]  # type: ignore[call-arg]  # results first


def test_depends_on_an_unknown_parent_raises_as_live_and_runs_nothing(events: list[Event]):
    with pytest.raises(JobStateError, match="depends_on: job default:nope does not exist"):
        add.using(depends_on=["default:nope"]).delay(1, 2)
    with pytest.raises(JobStateError, match="does not exist"):
        chain(add.s(1, 2), inputs_seen.s().using(depends_on=["default:nope"])).delay()
    assert events == []


def test_a_workflow_node_gets_its_depends_on_parent_after_its_inputs():
    parent = add.delay(10, 20)

    wf = chain(add.s(1, 2), inputs_seen.s().using(depends_on=[parent]))
    done = wf.delay()

    assert done.jobs[1].inputs is not None
    assert done.jobs[1].inputs.ids == (done.jobs[0].id, parent.id)
    # only the chain's result is prepended; both are inputs
    assert done.result == {"args": [3], "inputs": [3, 30], "workflow": done.id}


def test_adelay_with_depends_on_runs_on_the_event_loop():
    async def scenario() -> tuple[Any, Any]:
        a = await add.adelay(2, 3)
        d = await fetch_async.using(depends_on=[a], pass_results=True).adelay()  # type: ignore[call-arg]  # results first
        c = await fetch_async.using(depends_on=[explode.delay()], pass_results=True).adelay()  # type: ignore[call-arg]  # results first
        return d, c

    d, c = asyncio.run(scenario())
    assert (d.status, d.result) == (JobStatus.SUCCEEDED, [5])
    assert (c.status, c.cancel_reason) == (JobStatus.CANCELLED, CancelReason.DEPENDENCY_FAILED)


def test_only_the_last_outcomes_are_remembered(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(eager_outcomes, "KEPT", 3)
    first, *rest = [add.delay(i, i) for i in range(4)]

    assert eager_outcomes.outcome(first.id) is None
    assert [eager_outcomes.outcome(j.id) is not None for j in rest] == [True] * 3
    with pytest.raises(JobStateError, match="does not exist"):
        add.using(depends_on=[first]).delay(1, 2)
