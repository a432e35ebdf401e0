"""cancel.lua (cancel / delete from each state) and retry.lua (failed -> queued)."""

from __future__ import annotations

import pytest
import redis

from django_rqueue import JobStateError, LeaseLost
from django_rqueue.engine.calls import CancelMode
from tests.support import transitions
from tests.support.engine import Engine


def _in_state(engine: Engine, state: str) -> str:
    """A job in ``state``, next to an unrelated queued job in the same group."""
    engine.add(group="g")
    if state == "scheduled":
        return engine.add(group="g", delay_ms=60_000)
    if state == "queued":
        return engine.add(group="g")
    job_id = engine.add(group="h", priority=50, max_attempts=1)
    assert engine.reserve_id() == job_id
    if state == "failed":
        engine.fail(job_id)
    elif state == "succeeded":
        engine.ack(job_id)
    return job_id


@pytest.mark.parametrize("state", ["scheduled", "queued", "failed"])
def test_cancel_withdraws_the_job_and_keeps_a_cancelled_record(engine: Engine, state: str):
    job_id = _in_state(engine, state)
    assert engine.cancel(job_id) == state
    job = engine.job(job_id)
    assert job["s"] == "cancelled"
    assert "finished_at" in job
    assert 0 < engine.client.ttl(engine.keys.job(job_id)) <= 600
    for key in (engine.keys.delayed, engine.keys.failed, engine.keys.reserved):
        assert job_id not in engine.zset(key)
    engine.check_invariants()
    assert job_id not in engine.drain()


@pytest.mark.parametrize("state", ["scheduled", "queued", "failed", "succeeded", "cancelled"])
def test_delete_removes_the_job_entirely(engine: Engine, state: str):
    if state == "cancelled":
        job_id = _in_state(engine, "queued")
        engine.cancel(job_id)
    else:
        job_id = _in_state(engine, state)
    assert engine.cancel(job_id, mode="delete") == state
    assert not engine.client.exists(engine.keys.job(job_id))
    engine.check_invariants()
    assert job_id not in engine.drain()


def test_a_running_job_cannot_be_deleted(engine: Engine):
    job_id = _in_state(engine, "running")
    before = engine.snapshot()
    with pytest.raises(JobStateError) as info:
        engine.cancel(job_id, mode="delete")
    assert info.value.state == "running"
    assert engine.snapshot() == before


def test_cancelling_a_running_job_only_records_the_first_request(engine: Engine):
    job_id = _in_state(engine, "running")
    before = engine.snapshot()
    assert engine.cancel(job_id) == "running"
    after = engine.snapshot()
    requested = int(after[engine.keys.job(job_id)].pop("cx"))
    assert abs(requested - engine.now_ms()) < 5000
    assert after == before  # nothing else changed: the job still runs under its lease
    assert engine.cancel(job_id) == "running"  # asked again: the first time stays
    assert int(engine.job(job_id)["cx"]) == requested
    engine.check_invariants()


def test_cancel_running_ends_the_job_cancelled_without_a_retry(engine: Engine):
    job_id = _in_state(engine, "running")
    engine.cancel(job_id)
    token = int(engine.job(job_id)["token"])
    transitions.cancel_running(engine.client, engine.keys, job_id, token, ttl=600)
    job = engine.job(job_id)
    assert job["s"] == "cancelled" and "finished_at" in job and job["attempts"] == "1"
    assert 0 < engine.client.ttl(engine.keys.job(job_id)) <= 600
    assert job_id not in engine.zset(engine.keys.reserved)
    assert engine.client.hget(engine.keys.stats, "cancelled") == b"1"
    engine.check_invariants()
    assert job_id not in engine.drain()


def test_cancel_running_with_a_stale_token_changes_nothing(engine: Engine):
    job_id = _in_state(engine, "running")
    token = int(engine.job(job_id)["token"])
    before = engine.snapshot()
    with pytest.raises(LeaseLost):
        transitions.cancel_running(engine.client, engine.keys, job_id, token + 1, ttl=600)
    assert engine.snapshot() == before


def test_cancel_running_with_ttl_0_deletes_the_record_and_frees_the_unique_key(engine: Engine):
    engine.add(group="g")
    job_id = engine.add(priority=50, unique_key="once")
    assert engine.reserve_id() == job_id
    token = int(engine.job(job_id)["token"])
    transitions.cancel_running(engine.client, engine.keys, job_id, token, ttl=0)
    assert not engine.client.exists(engine.keys.job(job_id))
    assert not engine.client.exists(engine.keys.unique("once"))
    engine.check_invariants()


@pytest.mark.parametrize("state", ["succeeded", "cancelled"])
def test_a_finished_job_cannot_be_cancelled(engine: Engine, state: str):
    job_id = _in_state(engine, "succeeded" if state == "succeeded" else "queued")
    if state == "cancelled":
        engine.cancel(job_id)
    before = engine.snapshot()
    with pytest.raises(JobStateError) as info:
        engine.cancel(job_id)
    assert info.value.state == state
    assert engine.snapshot() == before


@pytest.mark.parametrize("mode", ["cancel", "delete"])
def test_a_missing_job_cannot_be_cancelled(engine: Engine, mode: CancelMode):
    with pytest.raises(JobStateError) as info:
        engine.cancel("default:" + "f" * 22, mode=mode)
    assert info.value.state is None
    assert engine.client.dbsize() == 0


def test_cancelling_from_the_middle_of_a_group_keeps_the_structures_consistent(engine: Engine):
    a = [engine.add(group="a") for _ in range(3)]
    b = [engine.add(group="b") for _ in range(2)]
    c = [engine.add(group="c")]
    engine.cancel(a[1])  # middle of a
    engine.cancel(c[0], mode="delete")  # c's only job: c leaves the ring
    engine.check_invariants()
    assert engine.stats()["queued"] == 4
    assert engine.lrange(engine.keys.group(0, "a")) == [a[0], a[2]]
    assert engine.lrange(engine.keys.ring(0)) == ["a", "b"]
    assert not engine.client.exists(engine.keys.group(0, "c"))
    assert engine.drain() == [a[0], b[0], a[2], b[1]]
    engine.check_invariants()
    assert engine.zset(engine.keys.prios) == {}
    assert engine.stats()["queued"] == 0


def test_cancelling_the_last_job_of_a_priority_drops_the_level(engine: Engine):
    top = engine.add(priority=10, group="x")
    low = engine.add(priority=0, group="y")
    engine.cancel(top)
    assert engine.zset(engine.keys.prios) == {"0": 0.0}
    assert not engine.client.exists(engine.keys.ring(10))
    assert engine.drain() == [low]


def test_cancelled_scheduled_job_is_not_promoted(engine: Engine):
    job_id = engine.add(delay_ms=1)
    engine.cancel(job_id)
    assert engine.promote() == (0, -1)
    assert engine.state(job_id) == "cancelled"


@pytest.mark.parametrize("mode", ["sometimes", ""])
def test_a_bad_mode_is_refused(engine: Engine, mode: str):
    job_id = engine.add()
    before = engine.snapshot()
    with pytest.raises(redis.ResponseError, match="bad mode"):
        engine.cancel(job_id, mode=mode)  # type: ignore[arg-type]
    assert engine.snapshot() == before


# -- retry ------------------------------------------------------------------------


def test_retry_requeues_a_failed_job_with_a_fresh_attempt_budget(engine: Engine):
    job_id = engine.add(max_attempts=1, group="g", priority=4)
    engine.reserve_id()
    engine.fail(job_id)
    errors_before = {k: v for k, v in engine.job(job_id).items() if k.startswith("err")}
    transitions.retry_failed(engine.client, engine.keys, job_id)
    job = engine.job(job_id)
    assert job["s"] == "queued"
    assert job["attempts"] == "0"
    assert "finished_at" not in job
    assert {k: v for k, v in job.items() if k.startswith("err")} == errors_before  # history kept
    assert engine.zset(engine.keys.failed) == {}
    assert engine.client.ttl(engine.keys.job(job_id)) == -1
    engine.check_invariants()
    got = engine.reserve()
    assert got is not None
    assert got[0] == job_id
    assert got[1]["attempts"] == "1"
    assert got[1]["token"] == "2"  # tokens never repeat


@pytest.mark.parametrize("state", ["scheduled", "queued", "running", "succeeded"])
def test_retry_only_applies_to_failed_jobs(engine: Engine, state: str):
    job_id = _in_state(engine, state)
    before = engine.snapshot()
    with pytest.raises(JobStateError) as info:
        transitions.retry_failed(engine.client, engine.keys, job_id)
    assert info.value.state == state
    assert engine.snapshot() == before


def test_retry_of_a_missing_job_is_a_state_error(engine: Engine):
    with pytest.raises(JobStateError) as info:
        transitions.retry_failed(engine.client, engine.keys, "default:" + "a" * 22)
    assert info.value.state is None
