"""include/expire_if_due.lua: a job whose expiry ('exp', Redis clock) has come is never started:
reserve (include/reserve_next.lua) and promote end it as cancelled with reason 'expired'."""

from __future__ import annotations

from django_rqueue.engine.fields import JobFields
from tests.support import transitions
from tests.support.engine import Engine
from tests.support.waiting import wait_until


def expired(engine: Engine) -> int:
    return engine.stats().get("expired", 0)


def assert_expired(engine: Engine, job_id: str, *, ttl: int = 600) -> None:
    job = engine.job(job_id)
    assert (job["s"], job[JobFields.CANCEL_REASON]) == ("cancelled", "expired")
    assert int(job["finished_at"]) >= int(job[JobFields.EXPIRES])
    assert 0 < engine.client.ttl(engine.keys.job(job_id)) <= ttl
    assert job["attempts"] == "0" and "error" not in job  # never ran, never failed


def test_a_relative_expiry_counts_from_the_enqueue_on_the_redis_clock(engine: Engine):
    job_id = engine.add(expires_in_ms=60_000)
    job = engine.job(job_id)
    assert int(job[JobFields.EXPIRES]) == int(job[JobFields.ENQUEUED_AT]) + 60_000
    assert JobFields.EXPIRES_IN not in job  # an argument of the enqueue, never stored
    assert engine.reserve_id() == job_id  # not due yet: reserved as usual


def test_an_absolute_expiry_is_stored_as_given(engine: Engine):
    job_id = engine.add(expires_at_ms=4_102_444_800_000)  # 2100-01-01
    assert engine.job(job_id)[JobFields.EXPIRES] == "4102444800000"


def test_reserve_ends_a_job_at_its_expiry_and_takes_the_next_in_the_same_call(engine: Engine):
    now = engine.now_ms()
    at_deadline = engine.add(expires_at_ms=now)  # reserved at or after `now`: due
    past = engine.add(expires_at_ms=now - 60_000)
    fresh = engine.add(expires_in_ms=60_000)
    plain = engine.add()
    assert engine.reserve_id() == fresh
    assert_expired(engine, at_deadline)
    assert_expired(engine, past)
    assert engine.reserve_id() == plain
    assert engine.reserve() is None
    assert expired(engine) == 2
    assert engine.stats()["queued"] == 0
    engine.check_invariants()


def test_a_batch_reservation_skips_expired_jobs(engine: Engine):
    now = engine.now_ms()
    ids = [engine.add(expires_at_ms=now if n % 2 else -1) for n in range(6)]
    got = transitions.reserve_many(
        engine.client, engine.keys, lease_ms=30_000, worker_id="w1", count=3
    ).jobs
    assert [job_id for job_id, _ in got] == ids[0::2]
    # Popped on the way: expired; the one behind the third reservation waits for a reserve.
    assert [engine.state(i) for i in ids[1::2]] == ["cancelled", "cancelled", "queued"]
    engine.check_invariants()


def test_ack_reserve_skips_expired_jobs_too(engine: Engine):
    running = engine.add()
    engine.reserve_id()
    gone = engine.add(expires_at_ms=engine.now_ms())
    after = engine.add()
    stale, reserved = transitions.ack_and_reserve(
        engine.client, engine.keys, running, engine.token(running), "1", 600,
        lease_ms=30_000, worker_id="w1",
    )  # fmt: skip
    assert stale is None and [r[0] for r in reserved.jobs] == [after]
    assert_expired(engine, gone)


def test_result_ttl_0_deletes_the_record_of_an_expired_job(engine: Engine):
    job_id = engine.add(expires_at_ms=engine.now_ms(), ttl=0)
    assert engine.reserve() is None
    assert engine.job(job_id) == {}
    assert expired(engine) == 1


def test_an_expired_job_releases_its_unique_key_and_wakes_its_waiters(engine: Engine):
    job_id = engine.add(expires_at_ms=engine.now_ms(), unique_key="report:7")
    engine.client.hset(engine.keys.job(job_id), JobFields.AWAITED, "1")
    assert engine.enqueue(unique_key="report:7")[:2] == ("duplicate", job_id)
    assert engine.reserve() is None
    assert engine.lrange(engine.keys.done(job_id)) == ["1"]
    assert not engine.client.exists(engine.keys.unique("report:7"))
    assert engine.enqueue(unique_key="report:7")[0] == "created"
    engine.check_invariants()


def test_promote_ends_a_due_scheduled_job_past_its_expiry_instead_of_queuing_it(engine: Engine):
    now = engine.now_ms()
    late = engine.add(delay_ms=3_600_000, expires_at_ms=now)
    in_time = engine.add(delay_ms=3_600_000, expires_at_ms=now + 3_600_000)
    engine.client.zadd(engine.keys.delayed, {late: now, in_time: now})  # both due now
    assert engine.promote()[0] == 1
    assert_expired(engine, late)
    assert engine.state(in_time) == "queued"
    assert expired(engine) == 1
    engine.check_invariants()


def test_a_retry_due_after_the_expiry_is_never_run(engine: Engine):
    job_id = engine.add(expires_in_ms=300)
    assert engine.reserve_id() == job_id  # the first attempt starts in time
    outcome, due = engine.fail(job_id, retry_ms=400)
    assert outcome == "retrying" and due is not None
    assert int(engine.job(job_id)[JobFields.EXPIRES]) < due
    wait_until(lambda: engine.now_ms() >= due, message="the retry is due")
    assert engine.promote()[0] == 0
    job = engine.job(job_id)
    assert (job["s"], job[JobFields.CANCEL_REASON]) == ("cancelled", "expired")
    assert job["attempts"] == "1" and job["nerr"] == "1"  # the failed attempt stays on record
    assert engine.zset(engine.keys.failed) == {}
    assert engine.stats().get("failed", 0) == 0  # not a failure
    engine.check_invariants()


def test_a_retry_due_before_the_expiry_runs(engine: Engine):
    job_id = engine.add(expires_in_ms=60_000)
    engine.reserve_id()
    engine.fail(job_id, retry_ms=0)
    assert engine.promote()[0] == 1
    assert engine.reserve_id() == job_id


def test_a_failed_job_retried_by_hand_after_its_expiry_is_expired_when_reserved(engine: Engine):
    job_id = engine.add(max_attempts=1, expires_at_ms=engine.now_ms() + 60_000)
    engine.reserve_id()
    engine.fail(job_id)
    engine.client.hset(engine.keys.job(job_id), JobFields.EXPIRES, engine.now_ms())  # time passed
    transitions.retry_failed(engine.client, engine.keys, job_id)
    assert engine.state(job_id) == "queued"  # the deadline is the job's: retry() keeps it
    assert engine.reserve() is None
    assert engine.job(job_id)[JobFields.CANCEL_REASON] == "expired"
    engine.check_invariants()


def test_an_expired_job_takes_no_slot_of_its_groups_concurrency_cap(engine: Engine):
    gone = engine.add(group="tenant", expires_at_ms=engine.now_ms())
    after = engine.add(group="tenant")
    assert engine.reserve_id(cap=1) == after  # the expired one did not use the only slot
    assert_expired(engine, gone)
    assert engine.running_per_group() == {"tenant": 1}
    engine.check_invariants()
