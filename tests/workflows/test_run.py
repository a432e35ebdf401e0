"""Workflows end to end on real Redis with in-process workers: results, policies, wait.

Every test runs on both paths (``dep_path``); on the outbox path the pollers' relay runs
between worker bursts (``tests/support/relay.py``).
"""

from __future__ import annotations

from typing import Any

import pytest
import redis
from django.db import transaction

from django_rqueue.exceptions import JobStateError
from django_rqueue.job import CancelReason, JobStatus, get_job
from django_rqueue.workflows import WorkflowState, chain, chord, get_workflow, group
from tests.support.inprocess import keys
from tests.support.relay import run_until_settled
from tests.workflows.conftest import DepPath
from tests.workflows.jobs import add, collect, double, explode, inputs_seen, note, triple_async

pytestmark = pytest.mark.usefixtures("worker_may_close_db_connections")


def callback_id(queue: str, workflow_id: str, which: str, generation: int = 0) -> str:
    return f"{queue}:{workflow_id.partition(':')[2]}.{which}{generation}"


def test_a_chain_passes_each_result_first(dep_path: DepPath):
    wf = chain(add.s(1, 2), double.s(), inputs_seen.s("x")).delay()

    run_until_settled()

    wf = wf.wait(5)
    assert wf.state is WorkflowState.SUCCEEDED
    assert wf.result == {"args": [6, "x"], "inputs": [6], "workflow": wf.id}
    assert [j.status for j in wf.jobs] == [JobStatus.SUCCEEDED] * 3
    assert [j.result for j in wf.jobs] == [3, 6, wf.result]


def test_a_group_returns_its_results_in_member_order(dep_path: DepPath):
    wf = group(add.s(1, 1), add.s(2, 2).using(queue="emails"), double.s(5)).delay()

    run_until_settled()

    wf = wf.wait(5)
    assert (wf.state, wf.result) == (WorkflowState.SUCCEEDED, [2, 4, 10])


def test_a_chord_gives_its_body_the_list(dep_path: DepPath):
    header = [add.s(1, 1).using(queue="emails"), add.s(2, 2), double.s(3)]
    wf = chord(header, collect.s("end")).delay()

    run_until_settled()

    assert wf.wait(5).result == [2, 4, 6, "end"]


def test_a_chord_without_header_gives_its_body_an_empty_list(dep_path: DepPath):
    wf = chord([], collect.s("end")).delay()

    run_until_settled()

    assert wf.wait(5).result == ["end"]  # collect([], "end")


def test_an_empty_group_succeeds_with_an_empty_list(dep_path: DepPath):
    wf = group().delay()

    run_until_settled()

    wf = wf.wait(5)
    assert (wf.state, wf.result, wf.jobs) == (WorkflowState.SUCCEEDED, [], [])


def test_si_ignores_the_result_which_stays_readable_from_the_context(dep_path: DepPath):
    wf = chain(add.s(1, 2), inputs_seen.si("only")).delay()

    run_until_settled()

    assert wf.wait(5).result == {"args": ["only"], "inputs": [3], "workflow": wf.id}


def test_a_failure_cancels_what_follows_and_fails_the_workflow(dep_path: DepPath):
    wf = (
        chain(explode.s(), double.s(), double.s())
        .on_error(note.s("err"))
        .on_complete(note.si("done"))
        .delay()
    )

    run_until_settled()

    wf = wf.wait(5)
    assert wf.state is WorkflowState.FAILED and wf.result is None
    jobs = wf.jobs
    assert [j.status for j in jobs] == [
        JobStatus.FAILED,
        JobStatus.CANCELLED,
        JobStatus.CANCELLED,
    ]
    assert [j.cancel_reason for j in jobs[1:]] == [CancelReason.DEPENDENCY_FAILED] * 2
    on_error = get_job(callback_id("default", wf.id, "e"))
    on_complete = get_job(callback_id("default", wf.id, "c"))
    assert on_error is not None and on_error.status is JobStatus.SUCCEEDED
    assert on_error.result == [wf.id, "err"]
    assert on_complete is not None and on_complete.result == ["done"]


def test_a_run_node_gets_dependency_failed_in_place_of_the_result(dep_path: DepPath):
    wf = chain(explode.s(7), inputs_seen.s().using(on_dependency_failure="run")).delay()

    run_until_settled()

    wf = wf.wait(5)
    failed, ran = wf.jobs
    assert failed.status is JobStatus.FAILED and ran.status is JobStatus.SUCCEEDED
    assert ran.result["args"][0].startswith("DependencyFailed(")
    assert "boom 7" in ran.result["args"][0] and ran.result["inputs"] == ran.result["args"]
    assert wf.state is WorkflowState.FAILED  # the failed node is still failed


def test_on_complete_runs_on_success_and_on_error_does_not(dep_path: DepPath):
    wf = chain(add.s(1, 2)).on_error(note.s("err")).on_complete(note.s("done")).delay()

    run_until_settled()

    assert wf.wait(5).state is WorkflowState.SUCCEEDED
    assert get_job(callback_id("default", wf.id, "e")) is None
    on_complete = get_job(callback_id("default", wf.id, "c"))
    assert on_complete is not None and on_complete.result == [wf.id, "done"]


def test_wait_times_out_while_nodes_have_not_run(dep_path: DepPath):
    wf = chain(add.s(1, 2), double.s()).delay()

    with pytest.raises(TimeoutError, match="still running"):
        wf.wait(0.1)
    assert [j.status for j in wf.jobs] == [JobStatus.QUEUED, JobStatus.WAITING]


@pytest.mark.django_db(transaction=True)
def test_a_workflow_created_inside_atomic_runs_after_the_commit(dep_path: DepPath):
    with transaction.atomic():
        wf = chain(add.s(2, 3), double.s()).delay()

    run_until_settled()

    assert wf.wait(5).result == 10


def test_every_node_of_a_workflow_with_many_nodes_runs(dep_path: DepPath):
    wf = chord([add.s(i, i) for i in range(30)], collect.s()).delay()

    run_until_settled()

    got: Any = wf.wait(5).result
    assert got == [2 * i for i in range(30)]
    found = get_workflow(wf.id)
    assert found is not None and found.state is WorkflowState.SUCCEEDED


def test_an_async_node_gets_the_result_first_too(dep_path: DepPath):
    wf = chain(add.s(1, 2), triple_async.s(), double.s()).delay()

    run_until_settled()

    assert wf.wait(5).result == 18


@pytest.mark.parametrize("queue", ["default", "emails"])
def test_a_node_with_depends_on_waits_for_a_job_outside_the_workflow(dep_path: DepPath, queue: str):
    outside = add.using(queue=queue).delay(10, 20)
    first = inputs_seen.s("in").using(depends_on=[outside])

    wf = chain(first, double.si(4)).delay()

    assert get_job(wf.node_ids[0]).status is JobStatus.WAITING  # type: ignore[union-attr]
    run_until_settled()
    wf = wf.wait(5)
    assert wf.state is WorkflowState.SUCCEEDED
    assert wf.jobs[0].result == {"args": ["in"], "inputs": [30], "workflow": wf.id}


def test_a_missing_depends_on_parent_refuses_the_workflow_and_leaves_nothing(
    dep_path: DepPath, rqueue_redis: redis.Redis
):
    first = add.s(1, 2).using(depends_on=["default:no-such-parent"])

    with pytest.raises(JobStateError, match="does not exist"):
        chain(first, double.s()).delay()

    assert [k for k in rqueue_redis.keys() if b":job:" in k or b":wf:" in k] == []
    assert rqueue_redis.zcard(keys().waiting) == 0 and rqueue_redis.zcard(keys().opening) == 0
