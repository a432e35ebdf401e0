"""The Job record (django_rqueue.job): get_job, fields, refresh, cancel, delete, retry."""

from __future__ import annotations

import asyncio
import datetime
import decimal
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from pytest_django import DjangoDbBlocker

from django_rqueue import Job, JobStateError, JobStatus, aget_job, get_job, job
from django_rqueue.engine.keys import QueueKeys, new_job_id
from django_rqueue.worker.loop import Worker
from tests.support import transitions

KEYS = QueueKeys.of("rqueue", "default")


@pytest.fixture(autouse=True)
def _worker_may_check_db_connections(django_db_blocker: DjangoDbBlocker) -> Iterator[None]:
    """The worker calls close_old_connections() around each job; let it see the test DB."""
    with django_db_blocker.unblock():
        yield


@job(max_attempts=2, timeout=12.5, result_ttl=300)
def add(a: int, b: int, *, scale: decimal.Decimal = decimal.Decimal(1)) -> decimal.Decimal:
    return (a + b) * scale


@job(max_attempts=1)
def broken(reason: str) -> None:
    raise RuntimeError(reason)


def _server_now(client: redis.Redis) -> datetime.datetime:
    seconds, micros = client.time()
    return datetime.datetime.fromtimestamp(seconds + micros / 1e6, tz=datetime.UTC)


def _work_one() -> None:
    assert Worker(["default"], with_poller=False).work_once()


def _reserve(client: redis.Redis) -> str:
    got = transitions.reserve(client, KEYS, lease_ms=60_000, worker_id="tester")
    assert got is not None
    return got[0]


def _failed(reason: str = "bad") -> Job[Any]:
    queued = broken.delay(reason)
    _work_one()
    queued.refresh()
    assert queued.status is JobStatus.FAILED
    return queued


# -- get_job ----------------------------------------------------------------------


def test_get_job_of_an_unknown_id_is_none():
    assert get_job(new_job_id("default")) is None


@pytest.mark.parametrize(
    "job_id",
    ["", "garbage", "default:xyz", "default:", ":" + "0" * 32, "undeclared:" + "0" * 32, "a" * 500],
)
def test_get_job_of_a_garbage_id_is_none(job_id: str, redis_client: redis.Redis):
    assert get_job(job_id) is None
    assert redis_client.dbsize() == 0


def test_get_job_of_a_non_string_is_a_type_error():
    with pytest.raises(TypeError, match="job id must be a str"):
        get_job(42)  # type: ignore[arg-type]


def test_get_job_reads_every_field_of_a_queued_job(redis_client: redis.Redis):
    before = _server_now(redis_client)
    queued = add.using(group="user:7", priority=-3).delay(1, 2, scale=decimal.Decimal("0.5"))
    after = _server_now(redis_client)
    got = get_job(queued.id)
    assert got is not None
    assert got.id == queued.id
    assert isinstance(got.id, str)
    assert got.name == add.name == "tests.test_job.add"
    assert got.queue == "default"
    assert got.status is JobStatus.QUEUED
    assert (got.args, got.kwargs) == ([1, 2], {"scale": decimal.Decimal("0.5")})
    assert (got.priority, got.group) == (-3, "user:7")
    assert (got.attempts, got.max_attempts, got.timeout, got.result_ttl) == (0, 2, 12.5, 300)
    assert got.enqueued_at is not None
    assert got.enqueued_at.tzinfo is not None
    assert before - datetime.timedelta(milliseconds=1) <= got.enqueued_at <= after
    assert got.run_at == got.enqueued_at
    assert (got.started_at, got.finished_at, got.result, got.error) == (None, None, None, None)
    assert (got.errors, got.problems, got.worker, got.unique_key) == ([], [], "", "")


@job
def echo(text: str) -> str:
    return text


@pytest.mark.parametrize("size", [10, 300, 5000])
def test_arguments_of_any_size_round_trip_through_the_job_hash(
    size: int, redis_client: redis.Redis
):
    text = ("ünïcode-" * size)[:size]  # multi-byte characters: parts end mid-character
    queued = echo.delay(text)
    got = get_job(queued.id)
    assert got is not None
    assert (got.args, got.problems) == ([text], [])
    _work_one()
    queued.refresh()
    assert (queued.status, queued.result) == (JobStatus.SUCCEEDED, text)


def test_a_small_job_is_stored_in_the_compact_listpack_encoding(redis_client: redis.Redis):
    """A ~100-byte payload must not turn the job hash into a hashtable (bench: bytes per job)."""
    queued = echo.delay("/tmp/rqueue-bench/0001-drain1.txt" * 3)
    assert redis_client.object("encoding", KEYS.job(queued.id)) == b"listpack"


def test_a_job_of_another_queue_is_found_without_naming_the_queue():
    queued = add.using(queue="emails").delay(1, 1)
    assert queued.id.startswith("emails:")
    got = get_job(queued.id)
    assert got is not None
    assert got.queue == "emails"


def test_a_succeeded_job_carries_its_result(redis_client: redis.Redis):
    queued = add.delay(2, 3, scale=decimal.Decimal("1.10"))
    _work_one()
    got = get_job(queued.id)
    assert got is not None
    assert got.status is JobStatus.SUCCEEDED
    assert got.result == decimal.Decimal("5.50")
    assert got.attempts == 1
    assert got.started_at is not None
    assert got.finished_at is not None
    assert got.started_at <= got.finished_at
    assert got.error is None
    assert 0 < redis_client.ttl(KEYS.job(queued.id)) <= 300  # result_ttl


# -- refresh --------------------------------------------------------------------------


def test_refresh_reads_the_job_again(redis_client: redis.Redis):
    queued = add.delay(1, 2)
    assert queued.status == "queued"
    _reserve(redis_client)
    queued.refresh()
    assert queued.status is JobStatus.RUNNING
    assert (queued.attempts, queued.token, queued.worker) == (1, 1, "tester")
    assert queued.started_at is not None


def test_refresh_of_a_deleted_job_is_a_state_error():
    queued = add.delay(1, 2)
    queued.delete()
    with pytest.raises(JobStateError, match="no longer exists") as info:
        queued.refresh()
    assert info.value.state is None


def test_aget_job_and_arefresh_are_the_async_twins(redis_client: redis.Redis):
    queued = add.delay(1, 2)
    read = asyncio.run(aget_job(queued.id))
    assert read == get_job(queued.id)
    assert asyncio.run(aget_job("default:nope")) is None
    assert asyncio.run(aget_job("undeclared:x")) is None
    with pytest.raises(TypeError):
        asyncio.run(aget_job(42))  # type: ignore[arg-type]

    _reserve(redis_client)
    asyncio.run(queued.arefresh())
    assert queued.status is JobStatus.RUNNING and queued.attempts == 1

    queued.token = 0
    transitions.release(redis_client, KEYS, queued.id, 1)
    queued.delete()
    with pytest.raises(JobStateError, match="no longer exists"):
        asyncio.run(queued.arefresh())


# -- cancel / delete --------------------------------------------------------------------


def _job_in(state: str, client: redis.Redis) -> Job[Any]:
    if state == "scheduled":
        return add.using(delay=3600).delay(1, 1)
    if state == "failed":
        return _failed()
    queued = add.delay(1, 1)
    if state == "running":
        assert _reserve(client) == queued.id
    elif state == "succeeded":
        _work_one()
    return queued


@pytest.mark.parametrize("state", ["scheduled", "queued", "failed"])
def test_cancel_from_a_pending_or_failed_state(state: str, redis_client: redis.Redis):
    target = _job_in(state, redis_client)
    target.cancel()
    assert target.status is JobStatus.CANCELLED
    got = get_job(target.id)
    assert got is not None
    assert got.status is JobStatus.CANCELLED  # readable until the record expires
    assert got.finished_at is not None
    assert redis_client.ttl(KEYS.job(target.id)) > 0
    for key in (KEYS.delayed, KEYS.failed, KEYS.reserved):
        assert redis_client.zscore(key, target.id) is None
    assert transitions.reserve(redis_client, KEYS, lease_ms=1000, worker_id="w") is None


def test_cancel_of_a_finished_job_is_refused(redis_client: redis.Redis):
    target = _job_in("succeeded", redis_client)
    target.refresh()
    before = redis_client.hgetall(KEYS.job(target.id))
    with pytest.raises(JobStateError) as info:
        target.cancel()
    assert info.value.state == "succeeded"
    assert redis_client.hgetall(KEYS.job(target.id)) == before


def test_cancel_of_a_running_job_asks_its_worker_and_the_job_still_runs(
    redis_client: redis.Redis,
):
    target = _job_in("running", redis_client)
    target.refresh()
    target.cancel()
    assert target.status is JobStatus.RUNNING
    assert target.cancel_requested_at is not None
    seconds, _ = redis_client.time()
    assert abs(target.cancel_requested_at.timestamp() - seconds) < 5
    fresh = get_job(target.id)
    assert fresh is not None and fresh.status is JobStatus.RUNNING
    assert fresh.cancel_requested_at == target.cancel_requested_at
    with pytest.raises(JobStateError):
        fresh.delete()  # a running job cannot be deleted


@pytest.mark.parametrize("state", ["scheduled", "queued", "failed", "succeeded"])
def test_delete_removes_the_record(state: str, redis_client: redis.Redis):
    target = _job_in(state, redis_client)
    target.delete()
    assert get_job(target.id) is None
    assert not redis_client.exists(KEYS.job(target.id))


def test_delete_of_a_running_job_is_refused(redis_client: redis.Redis):
    target = _job_in("running", redis_client)
    with pytest.raises(JobStateError) as info:
        target.delete()
    assert info.value.state == "running"
    assert redis_client.zscore(KEYS.reserved, target.id) is not None
    assert redis_client.hget(KEYS.job(target.id), "s") == b"running"


def test_cancel_of_a_job_that_is_gone_is_a_state_error():
    queued = add.delay(1, 1)
    queued.delete()
    with pytest.raises(JobStateError) as info:
        queued.cancel()
    assert info.value.state is None


# -- retry -------------------------------------------------------------------------------


def test_retry_of_a_failed_job_resets_attempts_and_requeues_it(redis_client: redis.Redis):
    failed = _failed("first")
    assert failed.attempts == 1
    failed.retry()
    assert (failed.status, failed.attempts) == (JobStatus.QUEUED, 0)
    got = get_job(failed.id)
    assert got is not None
    assert (got.status, got.attempts, got.finished_at) == (JobStatus.QUEUED, 0, None)
    assert [e["message"] for e in got.errors] == ["first"]  # history kept
    assert redis_client.zscore(KEYS.failed, failed.id) is None
    _work_one()  # a fresh budget: runs (and fails) again
    got.refresh()
    assert (got.status, got.attempts) == (JobStatus.FAILED, 1)
    assert [e["message"] for e in got.errors] == ["first", "first"]


@pytest.mark.parametrize("state", ["scheduled", "queued", "running", "succeeded"])
def test_retry_of_a_job_that_has_not_failed_is_refused(state: str, redis_client: redis.Redis):
    target = _job_in(state, redis_client)
    before = redis_client.hgetall(KEYS.job(target.id))
    with pytest.raises(JobStateError) as info:
        target.retry()
    assert info.value.state == state
    assert redis_client.hgetall(KEYS.job(target.id)) == before


# -- corrupt records -------------------------------------------------------------------------


def test_a_corrupt_payload_still_builds_a_job_with_problems(redis_client: redis.Redis):
    queued = add.delay(1, 2)
    redis_client.hset(KEYS.job(queued.id), "p", b"\x80not json{")
    got = get_job(queued.id)
    assert got is not None
    assert got.status is JobStatus.QUEUED
    assert got.name == add.name
    assert (got.args, got.kwargs) == ([], {})
    assert len(got.problems) == 1
    assert got.problems[0].startswith("undecodable payload")


def test_every_corrupt_field_is_listed_and_nothing_raises():
    fields = {
        b"s": b"exploded",
        b"n": b"x.y",
        b"p": b'{"a": 1}',
        b"result": b"{",
        b"error": b"plain text",
        b"nerr": b"1",
        b"err:1": b"[1, 2]",
        b"attempts": b"many",
        b"at": b"yesterday",
        b"prio": b"\xff",
        b"exp": b"soon",
        b"cancel_reason": b"boredom",
    }
    got = Job.from_fields("default:" + "1" * 22, fields)
    assert got.status is JobStatus.FAILED
    assert got.attempts == 0
    assert got.priority == 0
    assert got.enqueued_at is None
    assert (got.expires_at, got.cancel_reason) == (None, None)
    assert got.queue == "default"  # from the id
    assert got.error == {"type": "", "message": "plain text", "traceback": ""}
    assert got.errors == [{"type": "", "message": "[1, 2]", "traceback": ""}]
    text = " | ".join(got.problems)
    for expected in (
        "unknown state 'exploded'",
        "undecodable payload",
        "undecodable result",
        "unknown cancel reason 'boredom'",
    ):
        assert expected in text
    assert got.problems.count("undecodable error record") == 2


def test_an_empty_hash_builds_a_job_with_problems():
    got = Job.from_fields("default:" + "2" * 32, {})
    assert got.problems
    assert got.name == ""


# -- workflow fields ---------------------------------------------------------------


def test_a_plain_job_has_no_workflow_inputs_or_dependents():
    got = get_job(add.delay(1, 2).id)
    assert got is not None
    assert (got.workflow_id, got.inputs, got.dependents) == (None, None, None)


def test_get_job_reads_a_nodes_workflow_inputs_and_dependents(redis_client: redis.Redis):
    queued = add.delay(1, 2)
    later = new_job_id("default")
    redis_client.hset(
        KEYS.job(queued.id),
        mapping={
            "wf": "default:W",
            "dn": "2",
            "dw": "1",
            "di": "default:a default:b",
            "dr": "L",
            "i:1": "s3:41",
            "nx": f"pi1:{later} +",
        },
    )
    got = get_job(queued.id)
    assert got is not None and got.problems == []
    assert got.workflow_id == "default:W"
    assert got.inputs is not None
    assert (got.inputs.count, got.inputs.missing, got.inputs.ids) == (
        2,
        1,
        ("default:a", "default:b"),
    )
    assert got.inputs.pass_shape == "L" and got.inputs.arrivals[1].body == "41"
    assert got.dependents is not None and got.dependents.linked
    assert [edge.dependent for edge in got.dependents.edges] == [later]


def test_corrupt_inputs_or_dependents_are_problems_not_errors(redis_client: redis.Redis):
    queued = add.delay(1, 2)
    redis_client.hset(KEYS.job(queued.id), mapping={"dn": "two", "nx": "zz9:nope"})
    got = get_job(queued.id)
    assert got is not None and got.corrupt
    assert (got.inputs, got.dependents) == (None, None)
    assert any("undecodable inputs" in p for p in got.problems)
    assert any("undecodable dependents" in p for p in got.problems)
