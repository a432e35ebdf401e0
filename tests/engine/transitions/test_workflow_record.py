"""wf_record.lua: every change of a workflow's record, each checked against its state."""

from __future__ import annotations

import pytest

from django_rqueue.engine import workflow_record as record
from django_rqueue.engine.commands import Command
from django_rqueue.engine.fields import StatsFields, WorkflowFields
from django_rqueue.engine.keys import QueueKeys, new_job_id
from django_rqueue.engine.run import execute
from django_rqueue.engine.values import as_text
from django_rqueue.engine.workflow_record import RecordReply, RecordState
from tests.support.engine import Engine

GRACE_MS = 60_000
FIELDS: dict[str, str | int] = {WorkflowFields.NODE_COUNT: 3, WorkflowFields.NAME: "app.jobs.store"}


@pytest.fixture
def wf(engine: Engine) -> str:
    return new_job_id(engine.queue)


def send(engine: Engine, command: Command[RecordReply]) -> RecordReply:
    return execute(engine.client, command)


def fields(engine: Engine, wf: str) -> dict[str, str]:
    raw = engine.client.hgetall(engine.keys.workflow(wf))
    return {as_text(k): as_text(v) for k, v in raw.items()}


def workflows(engine: Engine) -> list[str]:
    """The queue's ``wfs`` members, oldest first."""
    members: list[bytes] = engine.client.zrange(engine.keys.workflows, 0, -1)  # type: ignore[assignment]
    return [m.decode() for m in members]


def started(engine: Engine) -> int:
    return int(engine.client.hget(engine.keys.stats, StatsFields.WORKFLOWS_STARTED) or 0)


def test_create_writes_a_running_record_once(engine: Engine, wf: str):
    assert send(engine, record.create(engine.keys, wf, FIELDS)) == RecordReply("ok")
    got = fields(engine, wf)
    assert got["st"] == "running" and got["n"] == "3" and got["gen"] == "0"
    assert int(got["t0"]) > 0 and engine.client.ttl(engine.keys.workflow(wf)) == -1
    assert engine.client.zscore(engine.keys.workflows, wf) == int(got["t0"])
    # Sent again (a lost reply): nothing changes, nothing is counted twice.
    assert send(engine, record.create(engine.keys, wf, {"n": 9})) == RecordReply("exists")
    assert fields(engine, wf)["n"] == "3" and started(engine) == 1


def test_a_staged_creation_is_committed_then_opened(engine: Engine, wf: str):
    assert send(engine, record.open_record(engine.keys, wf, GRACE_MS, FIELDS)).done
    assert fields(engine, wf)["st"] == "creating" and started(engine) == 0
    first_deadline = engine.client.zscore(engine.keys.opening, wf)
    assert first_deadline is not None
    assert send(engine, record.commit(engine.keys, wf, GRACE_MS)) == RecordReply("ok")
    assert fields(engine, wf)["st"] == "running" and started(engine) == 1
    again = send(engine, record.commit(engine.keys, wf, GRACE_MS))
    assert again == RecordReply("state", RecordState.RUNNING) and started(engine) == 1
    assert send(engine, record.opened(engine.keys, wf)).done
    assert engine.client.zscore(engine.keys.opening, wf) is None


def test_an_abort_deletes_only_an_uncommitted_creation(engine: Engine, wf: str):
    send(engine, record.open_record(engine.keys, wf, GRACE_MS, FIELDS))
    assert send(engine, record.abort(engine.keys, wf)) == RecordReply("ok")
    assert not engine.client.exists(engine.keys.workflow(wf))
    assert engine.client.zscore(engine.keys.workflows, wf) is None
    assert engine.client.zscore(engine.keys.opening, wf) is None
    # The slow creator's commit after the roll-back finds nothing to commit.
    assert send(engine, record.commit(engine.keys, wf, GRACE_MS)) == RecordReply("gone")
    other = new_job_id(engine.queue)
    send(engine, record.create(engine.keys, other, FIELDS))
    refused = send(engine, record.abort(engine.keys, other))
    assert refused == RecordReply("state", RecordState.RUNNING)
    assert engine.client.exists(engine.keys.workflow(other))


@pytest.mark.parametrize(
    ("computed", "cancel_first", "final"),
    [
        (RecordState.SUCCEEDED, False, RecordState.SUCCEEDED),
        (RecordState.FAILED, False, RecordState.FAILED),
        (RecordState.SUCCEEDED, True, RecordState.CANCELLED),
        (RecordState.FAILED, True, RecordState.CANCELLED),
    ],
)
def test_finish_decides_once_and_a_cancel_that_came_first_wins(
    engine: Engine, wf: str, computed: RecordState, cancel_first: bool, final: RecordState
):
    send(engine, record.create(engine.keys, wf, FIELDS))
    if cancel_first:
        assert send(engine, record.cancel(engine.keys, wf)) == RecordReply(
            "ok", RecordState.RUNNING
        )
    first = send(engine, record.finish(engine.keys, wf, computed, '"r"', 600))
    assert first == RecordReply("first", final, 0)
    got = fields(engine, wf)
    assert got["st"] == final and got["res"] == '"r"' and int(got["t1"]) >= int(got["t0"])
    assert 0 < engine.client.ttl(engine.keys.workflow(wf)) <= 600
    # The finisher run again (its ack was lost): the same answer, counted once.
    again = send(engine, record.finish(engine.keys, wf, RecordState.SUCCEEDED, "", 600))
    assert again == RecordReply("done", final, 0)
    counted = engine.client.hget(engine.keys.stats, f"wf{final}")
    assert counted == b"1"


def test_cancel_is_refused_once_the_workflow_ended(engine: Engine, wf: str):
    assert send(engine, record.cancel(engine.keys, wf)) == RecordReply("gone")
    send(engine, record.create(engine.keys, wf, FIELDS))
    assert send(engine, record.cancel(engine.keys, wf)).state is RecordState.RUNNING
    assert send(engine, record.cancel(engine.keys, wf)).state is RecordState.CANCELLING
    send(engine, record.finish(engine.keys, wf, RecordState.SUCCEEDED, "", 600))
    assert send(engine, record.cancel(engine.keys, wf)) == RecordReply(
        "state", RecordState.CANCELLED
    )


def test_a_failed_workflow_reopens_with_the_next_generation(engine: Engine, wf: str):
    send(engine, record.create(engine.keys, wf, FIELDS))
    refused = send(engine, record.reopen(engine.keys, wf, GRACE_MS, "{}"))
    assert refused == RecordReply("state", RecordState.RUNNING)
    send(engine, record.finish(engine.keys, wf, RecordState.FAILED, "", 600))
    send(engine, record.signalled(engine.keys, wf, 0))
    assert send(engine, record.reopen(engine.keys, wf, GRACE_MS, '{"arm":[]}')) == RecordReply(
        "ok", generation=1
    )
    got = fields(engine, wf)
    assert (got["st"], got["gen"], got["plan"], got["sig"]) == ("reopening", "1", '{"arm":[]}', "0")
    assert "t1" not in got and engine.client.ttl(engine.keys.workflow(wf)) == -1
    assert engine.client.zscore(engine.keys.opening, wf) is not None and started(engine) == 2
    assert send(engine, record.reopened(engine.keys, wf)).done
    assert fields(engine, wf)["st"] == "running" and "plan" not in fields(engine, wf)
    second = send(engine, record.finish(engine.keys, wf, RecordState.SUCCEEDED, "1", 600))
    assert second == RecordReply("first", RecordState.SUCCEEDED, 1)


def test_a_finish_with_no_ttl_deletes_the_record(engine: Engine, wf: str):
    send(engine, record.create(engine.keys, wf, FIELDS))
    send(engine, record.finish(engine.keys, wf, RecordState.SUCCEEDED, "", 0))
    assert not engine.client.exists(engine.keys.workflow(wf))
    assert engine.client.zscore(engine.keys.workflows, wf) is None


def test_a_finisher_computes_only_success_or_failure():
    with pytest.raises(ValueError, match="succeeded or failed"):
        record.finish(QueueKeys.of("rqueue", "default"), "q:x", RecordState.CANCELLED, "", 1)


def test_trim_forgets_only_the_workflows_whose_record_is_gone(engine: Engine):
    for _ in range(5):
        send(engine, record.create(engine.keys, new_job_id(engine.queue), FIELDS))
    # Oldest first (same-millisecond ones by id, as Redis orders equal scores).
    ids = workflows(engine)
    for gone in (ids[0], ids[2], ids[3]):
        engine.client.delete(engine.keys.workflow(gone))
    # Two members per call: the walk passes over the kept ones and says where to go on.
    walked = execute(engine.client, record.trim(engine.keys, 0, limit=2))
    assert walked == record.Trimmed(removed=1, next_rank=1)
    walked = execute(engine.client, record.trim(engine.keys, walked.next_rank, limit=2))
    assert walked == record.Trimmed(removed=2, next_rank=1)
    assert execute(engine.client, record.trim(engine.keys, 1, limit=2)).next_rank == 0
    kept = workflows(engine)
    assert kept == [ids[1], ids[4]]
