"""``django_rqueue.testing.capture_jobs``: enqueued calls are recorded, not sent to Redis."""

from __future__ import annotations

import asyncio
import datetime
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from pytest_django.fixtures import Settings as SettingsFixture

from django_rqueue import Job, JobStatus, get_job, signals
from django_rqueue.engine.connection import reset_clients
from django_rqueue.exceptions import JobStateError
from django_rqueue.job import CancelReason
from django_rqueue.testing import CapturedJobs, CapturedWorkflow, capture_jobs
from django_rqueue.workflows import WorkflowState, chord, group
from django_rqueue.workflows import chain as wf_chain
from tests.conftest import Event
from tests.jobs_app.jobs import chain, fail_always, read_ledger, record, retries_itself
from tests.support.inprocess import tags
from tests.workflows import jobs as wf_jobs


def test_capture_records_name_args_kwargs_and_resolved_options(
    ledger: str, rqueue_redis: redis.Redis, events: list[Event]
) -> None:
    with capture_jobs() as captured:
        plain = record.delay(ledger, "a")
        later = record.using(
            queue="emails",
            priority=5,
            delay=60,
            group="g",
            unique_key="k",
            max_attempts=4,
            expires=datetime.timedelta(minutes=2),
        ).delay(ledger, tag="b")
        at = datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC)
        batch = fail_always.using(run_at=at, expires=at + datetime.timedelta(hours=1)).delay_many(
            [((ledger, "c"), {}), ((ledger, "d"), {})]
        )

    assert isinstance(captured, CapturedJobs) and len(captured) == 4
    assert rqueue_redis.dbsize() == 0
    assert read_ledger(ledger) == [] and events == []  # nothing ran, nothing was announced

    first, second, third, fourth = captured
    assert (first.name, first.args, first.kwargs) == (record.name, [ledger, "a"], {})
    assert first.options["queue"] == "default" and first.options["delay"] is None
    assert first.options["run_at"] is None and first.options["on_commit"] is True
    assert first.options["expires"] is None
    assert first.job is plain and plain.status is JobStatus.QUEUED
    assert plain.id.startswith("default:") and len(plain.id) > len("default:")

    assert (second.args, second.kwargs) == ([ledger], {"tag": "b"})
    assert {k: second.options[k] for k in ("queue", "priority", "group", "unique_key")} == {
        "queue": "emails",
        "priority": 5,
        "group": "g",
        "unique_key": "k",
    }
    assert second.options["delay"] == 60 and second.options["max_attempts"] == 4
    assert second.options["expires"] == 120
    assert later.status is JobStatus.SCHEDULED and later.queue == "emails"

    assert [c.name for c in (third, fourth)] == [fail_always.name] * 2
    assert third.options["run_at"] == at and batch[0].run_at == at
    assert third.options["expires"] == at + datetime.timedelta(hours=1)
    assert [j.status for j in batch] == [JobStatus.SCHEDULED] * 2
    assert [c.job for c in captured.of(fail_always)] == batch
    assert len({c.job.id for c in captured}) == 4


def test_run_all_runs_the_captured_jobs_inline_as_eager_does(
    ledger: str, rqueue_redis: redis.Redis, events: list[Event]
) -> None:
    with capture_jobs() as captured:
        ok = record.delay(ledger, "a")
        bad = fail_always.delay(ledger, "b")
        retried = retries_itself.delay(ledger, "c", 1, 3600)
        chained = chain.delay(ledger, "d", "default", "e")  # enqueues record(ledger, "e")
        done = captured.run_all()
        assert captured.run_all() == []  # each job runs once

    assert rqueue_redis.dbsize() == 0
    assert done[:4] == [ok, bad, retried, chained]  # the same Job objects .delay() returned
    assert ok.status is JobStatus.SUCCEEDED and ok.result == "a"
    assert bad.status is JobStatus.FAILED and bad.attempts == 3
    assert retried.status is JobStatus.SUCCEEDED and retried.result == 2
    assert chained.status is JobStatus.SUCCEEDED
    assert len(captured) == 5 and captured[4].name == record.name and captured[4].ran
    assert done[4].status is JobStatus.SUCCEEDED
    assert tags(ledger) == ["a", "b", "b", "b", "c", "c", "d", "e"]
    assert ("job_failed", fail_always) in [(name, sender) for name, sender, _ in events]


def test_capture_wins_over_eager_and_still_validates(
    ledger: str, settings: SettingsFixture, rqueue_redis: redis.Redis
) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "EAGER": True}
    with capture_jobs() as captured:
        job = record.delay(ledger, "a")
        with pytest.raises(ValueError, match="not declared"):
            record.using(queue="nope").delay(ledger, "x")
        with pytest.raises(TypeError, match="tag"):
            record.delay(ledger, object())  # type: ignore[arg-type]
    assert job.status is JobStatus.QUEUED and len(captured) == 1
    assert read_ledger(ledger) == [] and rqueue_redis.dbsize() == 0


def test_nested_captures_threads_and_leaving_the_block(
    ledger: str, rqueue_redis: redis.Redis
) -> None:
    from_thread: list[Job[str]] = []
    with capture_jobs() as outer:
        record.delay(ledger, "outer")
        with capture_jobs() as inner:
            record.delay(ledger, "inner")
        thread = threading.Thread(target=lambda: from_thread.append(record.delay(ledger, "t")))
        thread.start()
        thread.join()
    after = record.delay(ledger, "after")

    assert [c.args[1] for c in outer] == ["outer"]
    assert [c.args[1] for c in inner] == ["inner"]
    for real in (from_thread[0], after):  # a thread starts with an empty context
        stored = get_job(real.id)
        assert stored is not None and stored.status is JobStatus.QUEUED


# -- workflows and depends_on ------------------------------------------------------------


@pytest.fixture
def no_redis(settings: SettingsFixture) -> Iterator[None]:
    """Redis unusable: a read or a write inside the test raises (a port nothing listens on)."""
    settings.RQUEUE = {**settings.RQUEUE, "REDIS_URL": "redis://127.0.0.1:1/0"}
    reset_clients()
    yield
    reset_clients()


@pytest.mark.usefixtures("no_redis")
def test_a_workflow_is_recorded_with_its_nodes_edges_callbacks_and_options(
    rqueue_redis: redis.Redis, events: list[Event]
) -> None:
    parent_id = "default:outside"
    with capture_jobs() as captured:
        plain = wf_jobs.add.delay(0, 0)
        wf = (
            chord(
                [wf_jobs.add.s(1, 1), wf_jobs.double.s(2).using(queue="emails")],
                wf_jobs.collect.s("end").using(on_dependency_failure="run", depends_on=[parent_id]),
            )
            .on_error(wf_jobs.note.s("failed"))
            .on_complete(wf_jobs.note.si("done"))
            .using(dependency_timeout=60)
            .delay()
        )

    assert rqueue_redis.dbsize() == 0 and events == []
    assert [c.job for c in captured] == [plain]  # the nodes are not in the flat list
    (recorded,) = captured.workflows
    assert isinstance(recorded, CapturedWorkflow)
    assert recorded.id == wf.id and recorded.workflow is wf
    assert wf.state is WorkflowState.RUNNING and wf.node_ids == [n.job.id for n in recorded.nodes]
    assert [(n.index, n.name, n.args) for n in recorded.nodes] == [
        (0, wf_jobs.add.name, [1, 1]),
        (1, wf_jobs.double.name, [2]),
        (2, wf_jobs.collect.name, ["end"]),
    ]
    assert [n.job.status for n in recorded.nodes] == [
        JobStatus.QUEUED,
        JobStatus.QUEUED,
        JobStatus.WAITING,
    ]
    assert recorded.nodes[1].options["queue"] == "emails"
    assert recorded.nodes[2].options["depends_on"] == (parent_id,)
    assert recorded.nodes[2].options["pass_results"] is True
    assert recorded.edges == [(0, 2), (1, 2), (f"ext:{parent_id}", 2)]
    assert recorded.options == {
        "dependency_timeout": 60,
        "on_dependency_failure": ["cancel", "cancel", "run"],
    }
    random_part = wf.id.partition(":")[2]
    assert recorded.on_error is not None and recorded.on_complete is not None
    assert (recorded.on_error.job.id, recorded.on_error.args) == (
        f"default:{random_part}.e0",
        [wf.id, "failed"],
    )
    assert (recorded.on_complete.job.id, recorded.on_complete.args) == (
        f"default:{random_part}.c0",
        ["done"],
    )
    with pytest.raises(TimeoutError, match="has not run"):
        wf.wait(1)


@pytest.mark.usefixtures("no_redis")
def test_a_captured_workflow_runs_with_eager_semantics_and_once(
    rqueue_redis: redis.Redis, events: list[Event]
) -> None:
    finished: list[WorkflowState] = []

    def receiver(sender: object, state: WorkflowState, **_: object) -> None:
        finished.append(state)

    signals.workflow_finished.connect(receiver, weak=False)
    try:
        with capture_jobs() as captured:
            wf = (
                wf_chain(group(wf_jobs.explode.s(1), wf_jobs.add.s(2, 2)), wf_jobs.collect.s())
                .on_error(wf_jobs.note.s("failed"))
                .on_complete(wf_jobs.note.si("done"))
                .delay()
            )
            (recorded,) = captured.workflows
            assert recorded.run() is wf
            assert recorded.run() is wf  # once
            assert recorded.nodes[0].run() is wf.jobs[0]  # a node runs its workflow: done
    finally:
        signals.workflow_finished.disconnect(receiver)

    assert rqueue_redis.dbsize() == 0
    assert wf.state is WorkflowState.FAILED and finished == [WorkflowState.FAILED]
    assert [j.status for j in wf.jobs] == [
        JobStatus.FAILED,
        JobStatus.SUCCEEDED,
        JobStatus.CANCELLED,
    ]
    assert wf.jobs[2].cancel_reason is CancelReason.DEPENDENCY_FAILED
    assert all(n.ran for n in recorded.nodes)
    assert recorded.on_error is not None and recorded.on_error.ran
    assert recorded.on_error.job.result == [wf.id, "failed"]
    assert recorded.on_complete is not None and recorded.on_complete.job.result == ["done"]
    started = [e[2]["job"].name for e in events if e[0] == "job_started"]
    assert started == [
        wf_jobs.explode.name,
        wf_jobs.add.name,
        wf_jobs.note.name,
        wf_jobs.note.name,
    ]


@pytest.mark.usefixtures("no_redis")
def test_run_all_runs_jobs_and_workflows_in_call_order(rqueue_redis: redis.Redis) -> None:
    with capture_jobs() as captured:
        first = wf_jobs.add.delay(1, 2)
        wf = wf_chain(wf_jobs.double.s(5), wf_jobs.double.s()).delay()
        # a dependent captured after its parent runs after it, with its value
        after = wf_jobs.collect.using(depends_on=[first], pass_results=True).delay("x")  # type: ignore[arg-type]  # results first
        assert after.status is JobStatus.WAITING
        done = captured.run_all()
        assert captured.run_all() == []

    assert done == [first, *wf.jobs, after]
    assert wf.result == 20 and after.result == [3, "x"]
    with capture_jobs() as captured:
        bad = wf_jobs.explode.delay()
        skipped = wf_jobs.double.using(depends_on=[bad]).delay(1)
        captured.run_all()
    assert bad.status is JobStatus.FAILED
    assert (skipped.status, skipped.cancel_reason) == (
        JobStatus.CANCELLED,
        CancelReason.DEPENDENCY_FAILED,
    )
    assert rqueue_redis.dbsize() == 0


def test_a_depends_on_call_is_one_captured_job_with_its_options(rqueue_redis: redis.Redis) -> None:
    with capture_jobs() as captured:
        d = wf_jobs.inputs_seen.using(
            depends_on=["default:p1", "emails:p2"], on_dependency_failure="run"
        ).delay("x")
        plain = wf_jobs.add.delay(1, 1)

    (c, p) = captured
    assert c.job is d and captured.workflows == []
    assert (c.options["depends_on"], c.options["on_dependency_failure"]) == (
        ("default:p1", "emails:p2"),
        "run",
    )
    assert c.options["pass_results"] is False
    assert p.options["depends_on"] is None and p.options["on_dependency_failure"] == "cancel"
    with pytest.raises(JobStateError, match="default:p1 does not exist"):
        c.run()  # its parents never ran
    assert not c.ran
    assert plain.status is JobStatus.QUEUED and rqueue_redis.dbsize() == 0


def test_adelay_is_captured_too(rqueue_redis: redis.Redis) -> None:
    async def scenario() -> tuple[Job[Any], Job[Any]]:
        with capture_jobs() as captured:
            a = await wf_jobs.add.adelay(1, 2)
            d = await wf_jobs.fetch_async.using(depends_on=[a], pass_results=True).adelay()  # type: ignore[call-arg]  # results first
            done = captured.run_all()
        assert done == [a, d] and [c.job for c in captured] == [a, d]
        return a, d

    a, d = asyncio.run(scenario())
    assert (a.result, d.result) == (3, [3])
    assert rqueue_redis.dbsize() == 0


def test_under_eager_a_workflow_is_captured_not_run(
    settings: SettingsFixture, rqueue_redis: redis.Redis, events: list[Event]
) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "EAGER": True}
    with capture_jobs() as captured:
        wf = wf_chain(wf_jobs.add.s(1, 2), wf_jobs.double.s()).delay()

    assert wf.state is WorkflowState.RUNNING and events == []
    assert captured.workflows[0].run().result == 6


@pytest.mark.usefixtures("no_redis")
def test_a_captured_workflow_whose_parent_has_not_run_can_run_once_it_has() -> None:
    with capture_jobs() as captured:
        wf = wf_chain(wf_jobs.inputs_seen.s().using(depends_on=["default:later"])).delay()
        (recorded,) = captured.workflows
        with pytest.raises(JobStateError, match="default:later does not exist"):
            recorded.run()
        assert (recorded.ran, wf.state) == (False, WorkflowState.RUNNING)
        parent = wf_jobs.add.using(job_id="later").delay(1, 2)
        assert parent.id == "default:later"
        assert captured[0].run() is parent
        assert recorded.run() is wf

    assert (recorded.ran, wf.state) == (True, WorkflowState.SUCCEEDED)
    assert wf.result == {"args": [], "inputs": [3], "workflow": wf.id}
