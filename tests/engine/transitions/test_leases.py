"""ack, fail, renew and reclaim: fencing tokens, retries, the failed store, expired leases."""

from __future__ import annotations

import json
import traceback

import pytest

from django_rqueue import JobStatus, LeaseLost, get_job
from django_rqueue.execution import error_record
from django_rqueue.worker.poller import Poller
from tests.support import transitions
from tests.support.engine import Engine
from tests.support.waiting import wait_until


def test_ack_stores_the_result_and_starts_the_record_ttl(engine: Engine):
    job_id = engine.add()
    engine.reserve_id()
    engine.ack(job_id, result='{"ok":1}')
    job = engine.job(job_id)
    assert job["s"] == "succeeded"
    assert job["result"] == '{"ok":1}'
    assert job["worker"] == "w1"  # the worker that ran it stays on the record
    assert int(job["finished_at"]) >= int(job["started_at"])
    assert 0 < engine.client.ttl(engine.keys.job(job_id)) <= 600
    assert engine.zset(engine.keys.reserved) == {}
    assert engine.stats()["succeeded"] == 1
    engine.check_invariants()


def test_renew_pushes_the_lease_deadline_forward(engine: Engine):
    job_id = engine.add()
    engine.reserve(lease_ms=1000)
    first = engine.zset(engine.keys.reserved)[job_id]
    deadline = engine.now_ms() + 60_000
    got = transitions.renew_lease(engine.client, engine.keys, job_id, 1, 60_000)
    assert got == engine.zset(engine.keys.reserved)[job_id]
    assert got >= deadline > first


def test_fail_with_a_retry_schedules_the_job_at_now_plus_delay(engine: Engine):
    job_id = engine.add(max_attempts=3)
    engine.reserve_id()
    before = engine.now_ms()
    outcome, run_at = engine.fail(job_id, retry_ms=45_000)
    after = engine.now_ms()
    assert outcome == "retrying"
    assert run_at is not None
    assert before + 45_000 <= run_at <= after + 45_000
    job = engine.job(job_id)
    assert job["s"] == "scheduled"
    assert int(job["due"]) == run_at
    assert "worker" not in job
    assert engine.zset(engine.keys.delayed) == {job_id: run_at}
    assert engine.zset(engine.keys.reserved) == {}
    assert engine.reserve() is None  # it waits for its run-at
    assert engine.stats()["retried"] == 1
    assert "failed" not in engine.stats()
    engine.check_invariants()


def test_fail_on_the_last_attempt_moves_the_job_to_the_failed_store(engine: Engine):
    job_id = engine.add(max_attempts=2, unique_key="only-one")
    errors = []
    for n in (1, 2):
        assert engine.reserve_id() == job_id
        error = error_record(ValueError(f"attempt {n}"), f"Traceback {n}\n")
        errors.append(json.loads(error))
        outcome, _ = engine.fail(job_id, retry_ms=0, error=error)
        if n == 1:
            assert outcome == "retrying"
            wait_until(lambda: engine.promote()[0] == 1, message="retry promoted")
    assert outcome == "failed"
    job = engine.job(job_id)
    assert job["s"] == "failed"
    assert json.loads(job["error"]) == errors[-1]
    assert [json.loads(job["err:1"]), json.loads(job["err:2"])] == errors
    assert job_id in engine.zset(engine.keys.failed)
    assert engine.stats()["failed"] == 1
    assert engine.stats()["retried"] == 1  # the first attempt only
    assert engine.client.ttl(engine.keys.job(job_id)) == -1  # kept until retried or deleted
    assert not engine.client.exists(engine.keys.unique("only-one"))
    engine.check_invariants()


def test_fail_without_retry_is_final_even_with_attempts_left(engine: Engine):
    job_id = engine.add(max_attempts=10)
    engine.reserve_id()
    assert engine.fail(job_id, retry_ms=-1) == ("failed", None)
    assert engine.state(job_id) == "failed"


def test_the_failed_job_reads_back_with_its_error_and_history(engine: Engine):
    job_id = engine.add(max_attempts=2)
    for n in (1, 2):
        engine.reserve_id()
        try:
            raise KeyError(f"missing {n}")
        except KeyError as exc:
            engine.fail(job_id, retry_ms=0, error=error_record(exc, traceback.format_exc()))
        engine.promote()
    job = get_job(job_id)
    assert job is not None
    assert job.status is JobStatus.FAILED
    assert job.attempts == 2
    assert job.error is not None
    assert job.error["type"] == "builtins.KeyError"
    assert job.error["message"] == "'missing 2'"
    assert "Traceback (most recent call last)" in job.error["traceback"]
    assert "raise KeyError" in job.error["traceback"]
    assert [e["message"] for e in job.errors] == ["'missing 1'", "'missing 2'"]
    assert job.finished_at is not None


# -- stale fencing tokens ------------------------------------------------------


def _reserved_twice(engine: Engine) -> str:
    """A job reserved (token 1) whose lease expired (reclaim fences it: token 2) and
    that was reserved again (token 3)."""
    job_id = engine.add(max_attempts=5)
    engine.reserve(lease_ms=1)
    wait_until(lambda: engine.reclaim()[0] == 1, message="lease reclaimed")
    assert engine.reserve_id() == job_id
    assert engine.token(job_id) == 3
    return job_id


@pytest.mark.parametrize("action", ["ack", "fail", "fail_retry", "renew"])
def test_a_stale_token_raises_lease_lost_and_changes_nothing(engine: Engine, action: str):
    job_id = _reserved_twice(engine)
    other = engine.add(group="other")  # something else in the structures, untouched too
    before = engine.snapshot()
    calls = {
        "ack": lambda: engine.ack(job_id, token=1),
        "fail": lambda: engine.fail(job_id, token=1, retry_ms=-1),
        "fail_retry": lambda: engine.fail(job_id, token=1, retry_ms=0),
        "renew": lambda: transitions.renew_lease(engine.client, engine.keys, job_id, 1, 60_000),
    }
    with pytest.raises(LeaseLost, match="stale fencing token"):
        calls[action]()
    assert engine.snapshot() == before
    assert engine.state(other) == "queued"
    engine.ack(job_id, token=3)  # the current holder still can
    assert engine.state(job_id) == "succeeded"


@pytest.mark.parametrize("action", ["ack", "fail", "renew"])
def test_reporting_on_a_job_that_is_not_running_is_stale(engine: Engine, action: str):
    job_id = engine.add()
    engine.reserve_id()
    engine.ack(job_id)
    before = engine.snapshot()
    with pytest.raises(LeaseLost, match="succeeded"):
        if action == "ack":
            engine.ack(job_id, token=2)  # a token that never held the job
        elif action == "fail":
            engine.fail(job_id, token=1)
        else:
            transitions.renew_lease(engine.client, engine.keys, job_id, 1, 1000)
    assert engine.snapshot() == before


def test_a_repeated_ack_by_the_same_holder_is_idempotent(engine: Engine):
    """An ack whose reply was lost is sent again: the second one changes nothing, raises nothing."""
    job_id = engine.add()
    engine.reserve_id()
    engine.ack(job_id, token=1)
    before = engine.snapshot()
    engine.ack(job_id, token=1)
    assert engine.snapshot() == before


@pytest.mark.parametrize(("retry_ms", "state"), [(60_000, "scheduled"), (-1, "failed")])
def test_a_repeated_fail_by_the_same_holder_is_idempotent(
    engine: Engine, retry_ms: int, state: str
):
    job_id = engine.add(max_attempts=3)
    engine.reserve_id()
    engine.fail(job_id, token=1, retry_ms=retry_ms)
    assert engine.state(job_id) == state
    before = engine.snapshot()
    engine.fail(job_id, token=1, retry_ms=retry_ms)
    assert engine.snapshot() == before


def test_reporting_on_a_missing_job_is_stale(engine: Engine):
    with pytest.raises(LeaseLost, match="missing"):
        engine.ack("default:" + "0" * 22, token=1)
    assert engine.client.dbsize() == 0


# -- expired leases -------------------------------------------------------------


def test_an_expired_lease_is_reclaimed_with_its_attempt_counted(engine: Engine):
    job_id = engine.add(max_attempts=3, group="g")
    engine.reserve(lease_ms=1)
    assert engine.state(job_id) == "running"
    wait_until(lambda: engine.reclaim()[:2] == (1, 0), message="lease reclaimed")
    job = engine.job(job_id)
    assert job["s"] == "queued"
    assert job["attempts"] == "1"  # the lost attempt counts
    assert "worker" not in job
    error = json.loads(job["error"])
    assert error["message"] == "lease expired"
    assert error["worker"] == "w1"  # the worker that lost the lease
    assert engine.zset(engine.keys.reserved) == {}
    assert engine.stats()["reclaimed"] == 1
    assert "retried" not in engine.stats()  # a lost attempt is reclaimed, not retried
    engine.check_invariants()
    assert engine.reserve_id() == job_id
    assert engine.job(job_id)["attempts"] == "2"


def test_a_live_lease_is_not_reclaimed(engine: Engine):
    job_id = engine.add()
    engine.reserve(lease_ms=60_000)
    requeued, failed, next_deadline = engine.reclaim()
    assert (requeued, failed) == (0, 0)
    assert 55_000 < next_deadline <= 60_000
    assert engine.state(job_id) == "running"


def test_an_expired_lease_with_no_attempts_left_goes_to_failed_as_lease_expired(engine: Engine):
    job_id = engine.add(max_attempts=1, unique_key="u1")
    engine.reserve(lease_ms=1)
    poller = Poller(["default"])

    def reclaimed() -> bool:
        poller.run_once()
        return engine.state(job_id) == "failed"

    wait_until(reclaimed, message="expired lease moved to failed")
    job = get_job(job_id)
    assert job is not None
    assert job.status is JobStatus.FAILED
    assert job.attempts == 1
    assert job.error is not None
    assert job.error["type"] == "django_rqueue.exceptions.LeaseExpired"
    assert job.error["message"] == "lease expired"
    assert job_id in engine.zset(engine.keys.failed)
    assert not engine.client.exists(engine.keys.unique("u1"))
    assert (engine.stats()["reclaimed"], engine.stats()["failed"]) == (1, 1)
    engine.check_invariants()


def test_reclaim_moves_at_most_a_batch(engine: Engine):
    ids = [engine.add(max_attempts=5) for _ in range(3)]
    for _ in ids:
        engine.reserve(lease_ms=1)
    deadline = max(engine.zset(engine.keys.reserved).values())
    wait_until(lambda: engine.now_ms() > deadline, message="leases expired")
    assert engine.reclaim(limit=2) == (2, 0, 0)
    assert engine.stats()["reclaimed"] == 2
    assert engine.reclaim(limit=2) == (1, 0, -1)
    assert engine.stats()["reclaimed"] == 3
    assert engine.reclaim(limit=2) == (0, 0, -1)
    assert engine.stats()["reclaimed"] == 3
    assert sorted(engine.drain()) == sorted(ids)
