"""The Workflow handle: get_workflow, its state, nodes, result, and wait without polling."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest
import redis

from django_rqueue.encryption import seal
from django_rqueue.engine import workflow_record as record
from django_rqueue.engine.fields import WorkflowFields
from django_rqueue.engine.keys import finisher_id, new_job_id
from django_rqueue.engine.run import execute
from django_rqueue.engine.workflow_record import RecordState
from django_rqueue.exceptions import JobStateError
from django_rqueue.job import JobStatus
from django_rqueue.workflows import Workflow, WorkflowState, get_workflow
from tests.support import transitions
from tests.support.jobs_in_state import Jobs


def created(client: redis.Redis, nodes: list[str]) -> str:
    """A workflow record (as a creation writes it) listing ``nodes``, and its finisher job."""
    jobs = Jobs(client)
    wf = new_job_id("default")
    spec = {"nodes": [[n, "tests.jobs_app.jobs.record"] for n in nodes], "edges": []}
    fields: dict[str, str | int] = {
        WorkflowFields.NODE_COUNT: len(nodes),
        WorkflowFields.NAME: "tests.jobs_app.jobs.record",
        WorkflowFields.SPEC: json.dumps(spec),
    }
    assert execute(client, record.create(jobs.keys(), wf, fields)).done
    jobs.queued(job_id=finisher_id(wf), priority=-100)
    return wf


def finish(client: redis.Redis, wf: str, state: RecordState, result: str = "") -> None:
    execute(client, record.finish(Jobs(client).keys(), wf, state, result, 600))


def test_an_unknown_or_foreign_id_is_no_workflow(rqueue_redis: redis.Redis):
    assert get_workflow(new_job_id("default")) is None
    assert get_workflow("nosuchqueue:abc") is None and get_workflow("no colon") is None
    with pytest.raises(TypeError, match="workflow id must be a str"):
        get_workflow(42)  # type: ignore[arg-type]


def test_a_running_workflow_lists_its_nodes_in_declared_order(rqueue_redis: redis.Redis):
    jobs = Jobs(rqueue_redis)
    nodes = [jobs.queued(), jobs.succeeded(), jobs.queued(queue="emails")]
    wf = created(rqueue_redis, nodes)
    got = get_workflow(wf)
    assert got is not None and got.problems == []
    assert (got.id, got.state, got.name) == (
        wf,
        WorkflowState.RUNNING,
        "tests.jobs_app.jobs.record",
    )
    assert got.node_ids == nodes and got.created_at is not None and got.finished_at is None
    assert [j.id for j in got.jobs] == nodes
    assert [j.status for j in got.jobs] == [JobStatus.QUEUED, JobStatus.SUCCEEDED, JobStatus.QUEUED]
    assert got.result is None and not got.cancel_requested


def test_an_ended_workflow_has_its_result_and_stands_for_expired_nodes(
    rqueue_redis: redis.Redis,
):
    jobs = Jobs(rqueue_redis)
    kept, expired = jobs.succeeded(), new_job_id("default")
    wf = created(rqueue_redis, [kept, expired])
    finish(rqueue_redis, wf, RecordState.SUCCEEDED, '[1, {"a": 2}]')
    got = get_workflow(wf)
    assert got is not None and got.state is WorkflowState.SUCCEEDED
    assert got.result == [1, {"a": 2}] and got.finished_at is not None
    first, gone = got.jobs
    assert (first.id, first.problems) == (kept, [])
    assert (gone.id, gone.status, gone.problems) == (
        expired,
        JobStatus.SUCCEEDED,
        ["record expired"],
    )


def test_an_encrypted_result_is_opened(rqueue_redis: redis.Redis, settings):
    from cryptography.fernet import Fernet

    settings.RQUEUE = {**settings.RQUEUE, "ENCRYPTION_KEYS": [Fernet.generate_key().decode()]}
    wf = created(rqueue_redis, [])
    finish(rqueue_redis, wf, RecordState.SUCCEEDED, seal('{"secret": 1}'))
    got = get_workflow(wf)
    assert got is not None and got.result == {"secret": 1}


def test_a_cancel_in_progress_shows_as_running_with_cancel_requested(rqueue_redis: redis.Redis):
    wf = created(rqueue_redis, [])
    execute(rqueue_redis, record.cancel(Jobs(rqueue_redis).keys(), wf))
    got = get_workflow(wf)
    assert got is not None and got.state is WorkflowState.RUNNING and got.cancel_requested


def test_a_corrupt_record_is_read_with_its_problems(rqueue_redis: redis.Redis):
    wf = new_job_id("default")
    key = Jobs(rqueue_redis).keys().workflow(wf)
    rqueue_redis.hset(key, mapping={"st": "sideways", "spec": "{", "gen": "x"})
    got = get_workflow(wf)
    assert got is not None and got.state is WorkflowState.FAILED and got.node_ids == []
    assert len(got.problems) == 3


def test_refresh_reads_again_and_fails_once_the_record_is_gone(rqueue_redis: redis.Redis):
    wf = created(rqueue_redis, [])
    got = get_workflow(wf)
    assert got is not None
    finish(rqueue_redis, wf, RecordState.FAILED)
    got.refresh()
    assert got.state is WorkflowState.FAILED
    rqueue_redis.delete(Jobs(rqueue_redis).keys().workflow(wf))
    with pytest.raises(JobStateError, match="no longer exists"):
        got.refresh()


def test_wait_returns_when_the_finisher_ends_the_workflow(rqueue_redis: redis.Redis):
    """No polling: the wait blocks on the finisher's wake-up list, as Job.wait does."""
    wf = created(rqueue_redis, [])
    handle = get_workflow(wf)
    assert handle is not None
    with pytest.raises(TimeoutError, match="still running"):
        handle.wait(0.2)
    keys = Jobs(rqueue_redis).keys()
    waited: list[Workflow | BaseException] = []

    def waiter() -> None:
        try:
            waited.append(handle.wait(30))
        except BaseException as exc:  # the test reads it
            waited.append(exc)

    thread = threading.Thread(target=waiter)
    thread.start()
    # What a finisher does: end the record, then its own job is acked.
    got = transitions.reserve(rqueue_redis, keys, lease_ms=60_000, worker_id="w")
    assert got is not None and got[0] == finisher_id(wf)
    finish(rqueue_redis, wf, RecordState.SUCCEEDED, '"done"')
    started = time.monotonic()
    transitions.ack(rqueue_redis, keys, finisher_id(wf), 1, "null", 600)
    thread.join(10)
    assert not thread.is_alive() and waited == [handle]
    assert time.monotonic() - started < 5
    assert handle.state is WorkflowState.SUCCEEDED and handle.result == "done"
    # An ended workflow returns at once.
    assert handle.wait(0) is handle


def test_await_is_the_async_twin(rqueue_redis: redis.Redis):
    wf = created(rqueue_redis, [])
    handle = get_workflow(wf)
    assert handle is not None
    keys = Jobs(rqueue_redis).keys()

    def end_it() -> None:
        got = transitions.reserve(rqueue_redis, keys, lease_ms=60_000, worker_id="w")
        assert got is not None
        finish(rqueue_redis, wf, RecordState.FAILED)
        transitions.ack(rqueue_redis, keys, finisher_id(wf), 1, "null", 600)

    async def main() -> Workflow:
        waiting = asyncio.create_task(handle.await_(30))
        await asyncio.sleep(0.1)
        assert not waiting.done()
        await asyncio.to_thread(end_it)
        return await asyncio.wait_for(waiting, 10)

    assert asyncio.run(main()).state is WorkflowState.FAILED
