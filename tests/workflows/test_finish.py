"""The finisher job: the workflow's end state, workflow_finished, the callbacks, once each."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from django_rqueue import job, registry, signals
from django_rqueue.engine.fields import WorkflowFields
from django_rqueue.engine.keys import finisher_id
from django_rqueue.exceptions import UnknownJob
from django_rqueue.job import Job, JobStatus, get_job
from django_rqueue.workflows import Workflow, WorkflowState, chain
from django_rqueue.workflows.finish import FINISHER
from django_rqueue.workflows.nodes import FINISHER_NAME
from tests.support.inprocess import keys, queued_ids
from tests.support.relay import run_until_settled
from tests.workflows.conftest import DepPath
from tests.workflows.jobs import add, double, explode, note

pytestmark = pytest.mark.usefixtures("worker_may_close_db_connections")


@pytest.fixture
def finished() -> Any:
    """Every ``workflow_finished`` sent during the test: ``(sender, workflow, state)``."""
    seen: list[tuple[object, Workflow, WorkflowState]] = []

    def receiver(sender: object, workflow: Workflow, state: WorkflowState, **kw: Any) -> None:
        seen.append((sender, workflow, state))

    signals.workflow_finished.connect(receiver, weak=False)
    yield seen
    signals.workflow_finished.disconnect(receiver)


def run_finisher_again(workflow_id: str) -> None:
    """What a worker does when it runs the finisher once more (a crash after its work)."""
    finisher = get_job(finisher_id(workflow_id))
    assert finisher is not None and finisher.status is JobStatus.SUCCEEDED
    args, kwargs = FINISHER.arguments(finisher)
    FINISHER.func(*args, **kwargs)


def test_workflow_finished_is_sent_once_with_the_workflow_and_its_state(
    dep_path: DepPath, finished: list[tuple[object, Workflow, WorkflowState]]
):
    wf = chain(add.s(1, 2), double.s()).delay()

    run_until_settled()

    assert len(finished) == 1
    sender, workflow, state = finished[0]
    assert sender is Workflow and state is WorkflowState.SUCCEEDED
    assert (workflow.id, workflow.state, workflow.result) == (wf.id, state, 6)


def test_a_finisher_run_again_sends_nothing_and_enqueues_nothing_twice(
    finished: list[tuple[object, Workflow, WorkflowState]], rqueue_redis: redis.Redis
):
    wf = chain(explode.s()).on_error(note.s("e")).on_complete(note.si("c")).delay()
    run_until_settled()
    assert [state for _, _, state in finished] == [WorkflowState.FAILED]

    run_finisher_again(wf.id)

    assert len(finished) == 1
    assert queued_ids(rqueue_redis) == []
    assert wf.wait(1).state is WorkflowState.FAILED


def test_a_finisher_killed_before_noting_the_signal_sends_it_again(
    finished: list[tuple[object, Workflow, WorkflowState]], rqueue_redis: redis.Redis
):
    wf = chain(add.s(1, 2)).delay()
    run_until_settled()
    rqueue_redis.hdel(keys().workflow(wf.id), WorkflowFields.SIGNALLED)

    run_finisher_again(wf.id)

    assert [w.id for _, w, _ in finished] == [wf.id, wf.id]


def test_the_finisher_resolves_by_its_reserved_name():
    named: Job[Any] = Job(
        id="default:x.f", name=FINISHER_NAME, queue="default", status=JobStatus.QUEUED
    )
    assert registry.resolve(named) is FINISHER
    unknown: Job[Any] = Job(
        id="default:y", name="rqueue:nope", queue="default", status=JobStatus.QUEUED
    )
    with pytest.raises(UnknownJob, match="rqueue:"):
        registry.resolve(unknown)


def test_no_job_may_take_a_name_of_the_reserved_prefix():
    with pytest.raises(ValueError, match="rqueue:"):
        job(name="rqueue:workflow.finish")(lambda: None)
