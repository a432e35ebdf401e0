"""include/trim_failed.lua: the failed store's retention (``failed_ttl``, ``failed_max``),
applied by fail.lua and reclaim.lua when a job enters the store and by trim_failed.lua."""

from __future__ import annotations

import pytest
import redis

from django_rqueue import get_job
from django_rqueue.engine.calls import Retention
from django_rqueue.engine.fields import JobFields
from django_rqueue.engine.scripts import load
from tests.support.engine import Engine
from tests.support.waiting import wait_until

#: Keep every failed job (no TTL, no cap).
KEEP = Retention(None, None)


def failed_jobs(engine: Engine, n: int, *, failed_at: list[int] | None = None) -> list[str]:
    """``n`` jobs in the failed store (kept), oldest first; ``failed_at`` (ms) rewrites their
    scores, as if they had failed then."""
    ids = []
    for _ in range(n):
        job_id = engine.add(max_attempts=1)
        assert engine.reserve_id() == job_id
        assert engine.fail(job_id, kept=KEEP)[0] == "failed"
        ids.append(job_id)
    if failed_at is not None:
        engine.client.zadd(engine.keys.failed, dict(zip(ids, failed_at, strict=True)))
    return ids


def fail_one(engine: Engine, kept: Retention) -> str:
    """One more job into the failed store, under ``kept``."""
    job_id = engine.add(max_attempts=1)
    assert engine.reserve_id() == job_id
    assert engine.fail(job_id, kept=kept)[0] == "failed"
    return job_id


def trimmed(engine: Engine) -> int:
    return engine.stats().get("trimmed", 0)


def test_a_failure_beyond_failed_max_deletes_the_oldest_failed_jobs(engine: Engine):
    old = failed_jobs(engine, 5, failed_at=[5, 1, 4, 2, 3])  # failed at 5, 1, 4, 2, 3 ms
    newest = fail_one(engine, Retention(None, 3))
    # Oldest first: the jobs that failed at 1, 2 and 3 ms go; 5, 4 and the new one stay.
    assert set(engine.zset(engine.keys.failed)) == {old[0], old[2], newest}
    for gone in (old[1], old[3], old[4]):
        assert engine.job(gone) == {}
        assert get_job(gone) is None
    assert trimmed(engine) == 3
    assert engine.stats()["failed"] == 6  # final failures ever: trimming keeps the history count
    engine.check_invariants()


def test_a_failure_deletes_the_jobs_that_failed_failed_ttl_ago_or_earlier(engine: Engine):
    now = engine.now_ms()
    old = failed_jobs(engine, 3, failed_at=[now - 7_200_000, now - 3_601_000, now - 3_599_000])
    newest = fail_one(engine, Retention(3600, None))
    assert set(engine.zset(engine.keys.failed)) == {old[2], newest}
    assert get_job(old[0]) is None and get_job(old[1]) is None
    assert get_job(old[2]) is not None
    assert trimmed(engine) == 2
    engine.check_invariants()


def test_ttl_and_max_together_delete_whichever_reaches_further(engine: Engine):
    now = engine.now_ms()
    old = failed_jobs(engine, 4, failed_at=[now - 100_000, now - 90_000, now - 10, now - 5])
    first = fail_one(engine, Retention(60, 4))  # the TTL: two are too old (the cap: one)
    assert [i for i in old if get_job(i) is None] == old[:2]
    second = fail_one(engine, Retention(60, 2))  # the cap: two too many (the TTL: none)
    assert set(engine.zset(engine.keys.failed)) == {first, second}
    assert trimmed(engine) == 4
    engine.check_invariants()


def test_a_call_deletes_at_most_its_limit_and_the_next_ones_take_the_rest(engine: Engine):
    now = engine.now_ms()
    old = failed_jobs(engine, 7, failed_at=[now - 100_000 + i for i in range(7)])
    kept = Retention(60, None, limit=3)
    fail_one(engine, kept)
    assert [i for i in old if get_job(i) is None] == old[:3]  # bounded, oldest first
    assert engine.trim(kept) == (3, True)
    assert [i for i in old if get_job(i) is None] == old[:6]
    assert engine.trim(kept) == (1, False)
    assert engine.trim(kept) == (0, False)
    assert trimmed(engine) == 7
    assert len(engine.zset(engine.keys.failed)) == 1
    engine.check_invariants()


def test_trim_failed_deletes_old_failures_when_no_new_failure_arrives(engine: Engine):
    now = engine.now_ms()
    old, recent = failed_jobs(engine, 2, failed_at=[now - 10_000, now])
    assert engine.trim(Retention(5, None)) == (1, False)
    assert get_job(old) is None and get_job(recent) is not None
    assert engine.trim(Retention(None, 1)) == (0, False)  # one left, one allowed
    assert trimmed(engine) == 1


def test_a_deleted_failed_job_leaves_nothing_behind(engine: Engine):
    (job_id,) = failed_jobs(engine, 1, failed_at=[1])
    engine.client.hset(engine.keys.job(job_id), JobFields.AWAITED, "1")
    engine.client.rpush(engine.keys.done(job_id), "1")  # Job.wait's wake-up list
    fail_one(engine, Retention(None, 1))
    assert not engine.client.exists(engine.keys.job(job_id), engine.keys.done(job_id))
    assert job_id not in engine.zset(engine.keys.failed)
    engine.check_invariants()


def test_none_keeps_every_failed_job(engine: Engine):
    failed_jobs(engine, 3, failed_at=[1, 2, 3])
    fail_one(engine, KEEP)
    assert engine.trim(KEEP) == (0, False)
    assert len(engine.zset(engine.keys.failed)) == 4
    assert trimmed(engine) == 0


def test_a_retried_attempt_does_not_trim(engine: Engine):
    failed_jobs(engine, 2, failed_at=[1, 2])
    job_id = engine.add(max_attempts=2)
    engine.reserve_id()
    assert engine.fail(job_id, retry_ms=60_000, kept=Retention(None, 1))[0] == "retrying"
    assert len(engine.zset(engine.keys.failed)) == 2


def test_reclaim_applies_the_retention_when_a_lost_lease_fails_its_job(engine: Engine):
    old = failed_jobs(engine, 2, failed_at=[1, 2])
    job_id = engine.add(max_attempts=1)
    engine.reserve(lease_ms=1)
    deadline = engine.zset(engine.keys.reserved)[job_id]
    wait_until(lambda: engine.now_ms() > deadline, message="the 1 ms lease ran out")
    assert engine.reclaim(kept=Retention(None, 2))[:2] == (0, 1)
    assert set(engine.zset(engine.keys.failed)) == {old[1], job_id}
    assert get_job(old[0]) is None
    assert trimmed(engine) == 1
    engine.check_invariants()


def test_a_stale_id_in_the_failed_store_is_dropped_without_touching_its_record(engine: Engine):
    (failed,) = failed_jobs(engine, 1, failed_at=[2])
    queued = engine.add()
    engine.client.zadd(engine.keys.failed, {queued: 1})  # not failed: a stale entry
    assert engine.trim(Retention(None, 1)) == (0, False)
    assert engine.zset(engine.keys.failed) == {failed: 2.0}
    assert engine.state(queued) == "queued"
    assert trimmed(engine) == 0
    engine.check_invariants()


@pytest.mark.parametrize("args", [["x", -1, 100], [-1, -1, 0], [-1, "-", 100]])
def test_bad_retention_arguments_are_refused(engine: Engine, args: list[str | int]):
    keys = [engine.keys.base, engine.keys.failed, engine.keys.stats]
    with pytest.raises(redis.ResponseError, match="trim_failed: bad"):
        load("trim_failed")(engine.client, keys, list(args))
