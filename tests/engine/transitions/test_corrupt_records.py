"""Corrupt data in Redis never leaves a structure half-changed (issue 23, item 1).

A job record that is not a hash (a foreign ``SET``, ``RPUSH`` ... where the job hash
was), a record without a state, counters that are not numbers, and rings, group lists
or schedule states of the wrong type: every script either ends the job concerned in
the failed store with an error saying what is wrong and goes on, or refuses with a
clear error before writing anything. ``Engine.check_invariants`` then holds.
"""

from __future__ import annotations

import json

import pytest
import redis

from django_rqueue import JobStateError, LeaseLost
from django_rqueue.engine import calls
from django_rqueue.engine.calls import FailedBatchMode
from django_rqueue.engine.replies import CORRUPT_STATE
from tests.support import transitions
from tests.support.engine import Engine

#: How a record is spoiled -> the problem the failed store names.
KINDS = {
    "string": "it is a string, not a hash",
    "list": "it is a list, not a hash",
    "set": "it is a set, not a hash",
    "zset": "it is a zset, not a hash",
    "stateless": 'it has no state (field "s")',
}
NOT_A_HASH = [k for k in KINDS if k != "stateless"]


def spoil(engine: Engine, job_id: str, kind: str) -> None:
    """Replace the record of ``job_id`` as a foreign write would."""
    key = engine.keys.job(job_id)
    if kind == "stateless":
        engine.client.hdel(key, "s")
        return
    engine.client.delete(key)
    if kind == "string":
        engine.client.set(key, "not a job")
    elif kind == "list":
        engine.client.rpush(key, "a", "b")
    elif kind == "set":
        engine.client.sadd(key, "a")
    else:
        engine.client.zadd(key, {"a": 1})


def assert_failed_as_corrupt(engine: Engine, job_id: str, problem: str) -> None:
    job = engine.job(job_id)
    assert job["s"] == "failed", job
    assert job_id in engine.zset(engine.keys.failed)
    error = json.loads(job["error"])
    assert error == {
        "type": "builtins.ValueError",
        "message": f"job record is corrupt: {problem}",
        "traceback": "",
    }
    assert json.loads(job[f"err:{job['nerr']}"]) == error


# -- reserve (reserve, reserve_batch, ack_reserve share include/reserve_next.lua) --------


@pytest.mark.parametrize("kind", list(KINDS))
def test_reserve_fails_a_corrupt_job_at_the_head_of_its_group_and_serves_the_rest(
    engine: Engine, kind: str
):
    victim = engine.add(group="g")
    healthy = [engine.add(group="g") for _ in range(2)]
    other = engine.add(group="h")
    spoil(engine, victim, kind)

    # The corrupt job took its group's turn: the group went to the tail of the ring.
    assert engine.drain() == [other, *healthy]

    assert_failed_as_corrupt(engine, victim, KINDS[kind])
    assert engine.stats()["failed"] == 1
    engine.check_invariants()
    # The group is still served: a new job of it is reserved.
    late = engine.add(group="g")
    assert engine.drain() == [late]


def test_a_batch_reserve_and_ack_reserve_pass_corrupt_jobs_by(engine: Engine):
    ids = [engine.add(group="g") for _ in range(5)]
    for victim in ids[1::2]:
        spoil(engine, victim, "string")
    got = transitions.reserve_many(
        engine.client, engine.keys, lease_ms=30_000, worker_id="w1", count=2
    )
    assert [job_id for job_id, _ in got.jobs] == [ids[0], ids[2]]
    stale, more = transitions.ack_and_reserve(
        engine.client,
        engine.keys,
        ids[0],
        engine.token(ids[0]),
        "null",
        600,
        lease_ms=30_000,
        worker_id="w1",
    )
    assert stale is None
    assert [job_id for job_id, _ in more.jobs] == [ids[4]]
    for victim in ids[1::2]:
        assert_failed_as_corrupt(engine, victim, KINDS["string"])
    engine.check_invariants()


def test_a_group_list_or_ring_of_the_wrong_type_is_dropped_and_the_queue_goes_on(engine: Engine):
    healthy = engine.add(group="h")
    high = engine.add(group="x", priority=5)
    # A ring member whose group list is a string, and a whole ring that is a string.
    engine.client.rpush(engine.keys.ring(0), "bad")
    engine.client.set(engine.keys.group(0, "bad"), "garbage")
    engine.client.delete(engine.keys.ring(5))
    engine.client.set(engine.keys.ring(5), "garbage")

    assert engine.drain() == [healthy]

    assert not engine.client.exists(engine.keys.group(0, "bad"))
    assert not engine.client.exists(engine.keys.ring(5))
    assert engine.zset(engine.keys.prios) == {}
    # What the corrupt ring held is lost to reserves (its record is left as it was).
    assert engine.state(high) == "queued"


@pytest.mark.parametrize("stats", ["field", "key"])
def test_a_corrupt_stats_counter_strands_nothing(engine: Engine, stats: str):
    ids = [engine.add(group="g") for _ in range(2)]
    if stats == "field":
        engine.client.hset(engine.keys.stats, "queued", "lots")
    else:
        engine.client.delete(engine.keys.stats)
        engine.client.set(engine.keys.stats, "garbage")
    assert engine.drain() == ids
    late = engine.add(group="g")  # an enqueue counts it again
    assert engine.drain() == [late]
    engine.ack(late)
    assert engine.stats()["succeeded"] == 1


def test_a_lease_set_of_the_wrong_type_fails_the_reserve_before_any_change(engine: Engine):
    first, second = engine.add(group="g"), engine.add(group="h")
    engine.client.set(engine.keys.reserved, "garbage")
    before = engine.snapshot()
    with pytest.raises(redis.ResponseError, match=r"reserved is a string, not a zset"):
        engine.reserve()
    assert engine.snapshot() == before
    engine.client.delete(engine.keys.reserved)
    assert engine.drain() == [first, second]


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_corrupt_job_in_a_run_of_one_group_is_failed_and_the_run_goes_on_after_it(
    engine: Engine, kind: str
):
    ids = [engine.add(group="g") for _ in range(4)]
    spoil(engine, ids[1], kind)
    got = transitions.reserve_many(
        engine.client, engine.keys, lease_ms=5000, worker_id="w", count=4
    )
    assert [job_id for job_id, _ in got.jobs] == [ids[0], *ids[2:]]
    assert_failed_as_corrupt(engine, ids[1], KINDS[kind])
    assert engine.stats()["queued"] == 0


def test_a_lease_set_of_the_wrong_type_fails_a_run_and_puts_every_job_back_in_order(
    engine: Engine,
):
    ids = [engine.add(group="g") for _ in range(4)]
    engine.client.set(engine.keys.reserved, "garbage")
    before = engine.snapshot()
    with pytest.raises(redis.ResponseError, match=r"reserved is a string, not a zset"):
        transitions.reserve_many(engine.client, engine.keys, lease_ms=5000, worker_id="w", count=4)
    assert engine.snapshot() == before
    engine.client.delete(engine.keys.reserved)
    assert engine.drain() == ids


def test_counters_that_are_not_numbers_are_reset_by_the_reserve(engine: Engine):
    job_id = engine.add()
    engine.client.hset(engine.keys.job(job_id), mapping={"token": "abc", "attempts": "nan"})
    assert engine.reserve_id() == job_id
    job = engine.job(job_id)
    assert (job["token"], job["attempts"]) == ("1", "1")


# -- promote ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(KINDS))
def test_promote_fails_a_corrupt_due_job_and_promotes_the_others(engine: Engine, kind: str):
    now = engine.now_ms()
    victim = engine.add(run_at_ms=now + 60_000)
    healthy = engine.add(run_at_ms=now + 60_000)
    spoil(engine, victim, kind)
    engine.client.zadd(engine.keys.delayed, {victim: 1, healthy: 2, "not-a-job-id": 0})

    assert engine.promote() == (1, -1)

    assert_failed_as_corrupt(engine, victim, KINDS[kind])
    assert engine.state(healthy) == "queued"
    engine.check_invariants()


def test_a_priority_that_is_not_a_number_is_queued_at_priority_0(engine: Engine):
    job_id = engine.add(delay_ms=60_000)
    engine.client.hset(engine.keys.job(job_id), "prio", "high")
    engine.client.zadd(engine.keys.delayed, {job_id: 1})
    assert engine.promote() == (1, -1)
    assert engine.lrange(engine.keys.group(0, "")) == [job_id]
    assert engine.drain() == [job_id]


# -- reclaim, fail, release -------------------------------------------------------------


@pytest.mark.parametrize("kind", list(KINDS))
def test_reclaim_fails_a_corrupt_record_whose_lease_expired(engine: Engine, kind: str):
    victim = engine.add()
    healthy = engine.add()
    assert engine.reserve_id(lease_ms=1) == victim
    assert engine.reserve_id(lease_ms=1) == healthy
    spoil(engine, victim, kind)
    engine.client.zadd(engine.keys.reserved, {victim: 1, healthy: 1, "not-a-job-id": 1})

    requeued, failed, _ = engine.reclaim()

    assert (requeued, failed) == (1, 1)
    assert_failed_as_corrupt(engine, victim, KINDS[kind])
    assert engine.state(healthy) == "queued"
    engine.check_invariants()


def test_reclaim_of_a_record_without_state_gives_its_group_slot_back(engine: Engine):
    victim = engine.add(group="g")
    waiting = engine.add(group="g")
    assert engine.reserve_id(lease_ms=1, cap=1) == victim
    spoil(engine, victim, "stateless")
    engine.client.zadd(engine.keys.reserved, {victim: 1})
    assert engine.reclaim()[:2] == (0, 1)
    assert engine.running_per_group() == {}
    engine.check_invariants()
    assert engine.reserve_id(cap=1) == waiting


def test_reclaim_and_fail_read_counters_that_are_not_numbers_with_fallbacks(engine: Engine):
    first, second = engine.add(max_attempts=5), engine.add(max_attempts=5)
    engine.reserve_id(lease_ms=1)
    engine.reserve_id()
    # attempts unreadable: counts as used up; max unreadable: the default (3); nerr: restarts.
    engine.client.hset(engine.keys.job(first), mapping={"attempts": "x", "nerr": "1.5"})
    engine.client.hset(engine.keys.job(second), mapping={"max": "lots", "nerr": "y"})
    engine.client.zadd(engine.keys.reserved, {first: 1})
    assert engine.reclaim()[:2] == (0, 1)
    assert engine.state(first) == "failed"
    assert engine.job(first)["nerr"] == "1"
    assert engine.fail(second, retry_ms=0)[0] == "retrying"  # attempt 1 of the default 3
    assert engine.job(second)["nerr"] == "1"
    engine.check_invariants()


def test_release_with_attempts_that_are_not_a_number(engine: Engine):
    job_id = engine.add()
    engine.reserve_id()
    engine.client.hset(engine.keys.job(job_id), "attempts", "many")
    engine.release(job_id)
    job = engine.job(job_id)
    assert (job["s"], job["attempts"], job["token"]) == ("queued", "0", "2")
    engine.check_invariants()


# -- reports and admin actions on a record that is not a hash ---------------------------


def _running_then_spoiled(engine: Engine) -> tuple[str, int]:
    job_id = engine.add()
    engine.add()
    engine.reserve_id()
    token = engine.token(job_id)
    spoil(engine, job_id, "string")
    return job_id, token


@pytest.mark.parametrize("report", ["ack", "fail", "renew", "release", "cancel_running"])
def test_a_report_on_a_corrupt_record_is_stale_and_changes_nothing(engine: Engine, report: str):
    job_id, token = _running_then_spoiled(engine)
    before = engine.snapshot()
    c, k = engine.client, engine.keys
    with pytest.raises(LeaseLost, match="its record in Redis is corrupt"):
        if report == "ack":
            transitions.ack(c, k, job_id, token, "null", 600)
        elif report == "fail":
            engine.fail(job_id, token=token)
        elif report == "renew":
            transitions.renew_lease(c, k, job_id, token, 30_000)
        elif report == "release":
            transitions.release(c, k, job_id, token)
        else:
            transitions.cancel_running(c, k, job_id, token, ttl=600)
    assert engine.snapshot() == before


def test_ack_reserve_on_a_corrupt_record_still_reserves_the_next_job(engine: Engine):
    job_id, token = _running_then_spoiled(engine)
    stale, got = transitions.ack_and_reserve(
        engine.client, engine.keys, job_id, token, "null", 600, lease_ms=30_000, worker_id="w1"
    )
    assert stale is not None and "corrupt" in str(stale)
    assert len(got.jobs) == 1


@pytest.mark.parametrize("action", ["cancel", "retry", "run_now"])
def test_an_admin_action_on_a_corrupt_record_is_refused_and_changes_nothing(
    engine: Engine, action: str
):
    job_id = engine.add(delay_ms=60_000)
    spoil(engine, job_id, "list")
    before = engine.snapshot()
    with pytest.raises(JobStateError) as info:
        if action == "cancel":
            engine.cancel(job_id)
        elif action == "retry":
            transitions.retry_failed(engine.client, engine.keys, job_id)
        else:
            transitions.run_now(engine.client, engine.keys, job_id)
    assert info.value.state == CORRUPT_STATE
    assert engine.snapshot() == before


@pytest.mark.parametrize("kind", ["string", "stateless"])
def test_delete_removes_a_corrupt_record(engine: Engine, kind: str):
    job_id = engine.add(delay_ms=60_000)
    spoil(engine, job_id, kind)
    assert engine.cancel(job_id, mode="delete") == CORRUPT_STATE
    assert not engine.client.exists(engine.keys.job(job_id))
    assert job_id not in engine.zset(engine.keys.delayed)
    engine.check_invariants()


def test_empty_queue_deletes_corrupt_records_and_lists(engine: Engine):
    ids = [engine.add(group="g") for _ in range(3)]
    spoil(engine, ids[1], "string")
    engine.client.rpush(engine.keys.ring(0), "bad")
    engine.client.set(engine.keys.group(0, "bad"), "garbage")
    deleted, _dropped, more = transitions.empty_queue(engine.client, engine.keys, 100)
    assert (deleted, more) == (3, False)
    for job_id in ids:
        assert not engine.client.exists(engine.keys.job(job_id))
    assert not engine.client.exists(engine.keys.group(0, "bad"))
    engine.check_invariants()


@pytest.mark.parametrize("mode", ["retry", "delete"])
def test_failed_batch_passes_a_corrupt_failed_record_by(engine: Engine, mode: FailedBatchMode):
    ids = [engine.add(max_attempts=1) for _ in range(2)]
    for job_id in ids:
        engine.reserve_id()
        engine.fail(job_id)
    spoil(engine, ids[0], "string")
    upto = engine.now_ms()
    done, _skipped, stale, scanned = transitions.failed_batch(
        engine.client, engine.keys, mode=mode, limit=10, offset=0, upto_ms=upto
    )
    assert scanned == 2
    if mode == "delete":
        assert (done, stale) == (2, 0)
        assert not engine.client.exists(engine.keys.job(ids[0]))
    else:
        assert (done, stale) == (1, 1)
        assert_failed_as_corrupt(engine, ids[0], KINDS["string"])
    engine.check_invariants()


def test_retention_deletes_a_corrupt_failed_record(engine: Engine):
    job_id = engine.add(max_attempts=1)
    engine.reserve_id()
    engine.fail(job_id)
    spoil(engine, job_id, "set")
    assert engine.trim(calls.Retention(ttl=None, max_jobs=0, limit=10)) == (1, False)
    assert not engine.client.exists(engine.keys.job(job_id))
    assert engine.zset(engine.keys.failed) == {}


def test_enqueue_over_a_corrupt_record_is_refused_before_writing(engine: Engine):
    engine.client.set(engine.keys.job("default:mine"), "garbage")
    before = engine.snapshot()
    with pytest.raises(redis.ResponseError, match="job record default:mine is corrupt: it is a"):
        engine.enqueue(job_id="default:mine")
    assert engine.snapshot() == before


# -- periodic entries -------------------------------------------------------------------

FIELDS: dict[str, str | int] = {"n": "tests.noop", "p": "[]"}


def test_a_corrupt_schedule_state_neither_loses_a_tick_nor_stops_the_entry(engine: Engine):
    transitions.schedule_sync(engine.client, engine.keys, [("a", "every:1", 5_000)])
    engine.client.delete(engine.keys.schedule_entry("a"))
    engine.client.set(engine.keys.schedule_entry("a"), "garbage")
    job = calls.NewJob("default:tick", 0, "", "", 0, FIELDS)
    reply = transitions.schedule_claim(
        engine.client, engine.keys, job, entry="a", tick_ms=5_000, next_tick_ms=6_000
    )
    assert reply[0] == "created"
    assert engine.zset(engine.keys.schedule) == {"a": 6_000}
    assert engine.job_like(engine.keys.schedule_entry("a")) == {"last": "5000", "job": job.job_id}


def test_schedule_run_now_and_sync_mend_corrupt_schedule_keys(engine: Engine):
    engine.client.set(engine.keys.schedule_entry("a"), "garbage")
    engine.client.set(engine.keys.schedule, "garbage")
    job = calls.NewJob("default:now", 0, "", "", 0, FIELDS)
    assert transitions.schedule_run_now(engine.client, engine.keys, job, entry="a")[0] == "created"
    engine.client.set(engine.keys.schedule_entry("a"), "garbage")
    assert transitions.schedule_sync(engine.client, engine.keys, [("a", "every:1", 5_000)]) == (
        1,
        0,
    )
    assert engine.zset(engine.keys.schedule) == {"a": 5_000}
    assert engine.job_like(engine.keys.schedule_entry("a")) == {"spec": "every:1"}
