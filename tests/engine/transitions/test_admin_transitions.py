"""The transitions behind the admin: run now, failed batches, per-minute throughput."""

from __future__ import annotations

import pytest

from django_rqueue.exceptions import JobStateError
from tests.support import transitions
from tests.support.engine import Engine, _s


def failed_job(engine: Engine, name: str = "tests.noop") -> str:
    job_id = engine.add(max_attempts=1, name=name)
    assert engine.reserve_id() == job_id
    assert engine.fail(job_id) == ("failed", None)
    return job_id


def test_run_now_queues_a_scheduled_job_at_once(engine: Engine):
    job_id = engine.add(delay_ms=3_600_000, group="g")
    transitions.run_now(engine.client, engine.keys, job_id)
    assert engine.state(job_id) == "queued"
    assert engine.zset(engine.keys.delayed) == {}
    assert engine.drain() == [job_id]


@pytest.mark.parametrize("setup", ["queued", "missing"])
def test_run_now_refuses_a_job_that_is_not_scheduled(engine: Engine, setup: str):
    job_id = engine.add() if setup == "queued" else "default:" + "0" * 22
    before = engine.snapshot()
    with pytest.raises(JobStateError) as info:
        transitions.run_now(engine.client, engine.keys, job_id)
    assert info.value.state == (None if setup == "missing" else "queued")
    assert engine.snapshot() == before


def test_failed_batch_retries_in_batches_oldest_first(engine: Engine):
    ids = [failed_job(engine) for _ in range(7)]
    upto = int(max(engine.zset(engine.keys.failed).values()))
    done = []
    offset = 0
    while True:
        got = transitions.failed_batch(
            engine.client, engine.keys, mode="retry", limit=3, offset=offset, upto_ms=upto
        )
        done.append(got)
        offset += got[1]
        if got[3] < 3:
            break
    assert [d[0] for d in done] == [3, 3, 1]
    assert engine.zset(engine.keys.failed) == {}
    assert {engine.state(i) for i in ids} == {"queued"}
    assert engine.client.hget(engine.keys.job(ids[0]), "attempts") == b"0"
    engine.check_invariants()


def test_failed_batch_with_a_name_filter_skips_and_keeps_the_others(engine: Engine):
    a = [failed_job(engine, "a") for _ in range(3)]
    b = [failed_job(engine, "b") for _ in range(3)]
    upto = int(max(engine.zset(engine.keys.failed).values()))
    got = transitions.failed_batch(
        engine.client, engine.keys, mode="delete", limit=100, offset=0, upto_ms=upto, name="b"
    )
    assert got == (3, 3, 0, 6)
    assert set(engine.zset(engine.keys.failed)) == set(a)
    assert all(engine.client.exists(engine.keys.job(i)) == 0 for i in b)
    engine.check_invariants()


def test_failed_batch_leaves_jobs_that_failed_after_it_started(engine: Engine):
    old = failed_job(engine)
    upto = int(engine.zset(engine.keys.failed)[old])
    engine.client.zadd(engine.keys.failed, {old: upto})
    new = failed_job(engine)
    engine.client.zadd(engine.keys.failed, {new: upto + 1})
    got = transitions.failed_batch(
        engine.client, engine.keys, mode="retry", limit=10, offset=0, upto_ms=upto
    )
    assert got == (1, 0, 0, 1)
    assert engine.state(new) == "failed"


def test_failed_batch_drops_ids_whose_record_is_gone(engine: Engine):
    job_id = failed_job(engine)
    engine.client.delete(engine.keys.job(job_id))
    got = transitions.failed_batch(
        engine.client, engine.keys, mode="retry", limit=10, offset=0, upto_ms=2**50
    )
    assert got == (0, 0, 1, 1)
    assert engine.zset(engine.keys.failed) == {}


def test_failed_batch_rejects_a_bad_mode(engine: Engine):
    with pytest.raises(Exception, match="bad mode"):
        transitions.failed_batch(
            engine.client,
            engine.keys,
            mode="zap",  # type: ignore[arg-type]
            limit=1,
            offset=0,
            upto_ms=0,
        )


def test_successes_and_final_failures_are_counted_per_minute(engine: Engine):
    for _ in range(2):
        job_id = engine.add()
        engine.reserve_id()
        engine.ack(job_id)
    failed_job(engine)
    raw = {_s(k): int(v) for k, v in engine.client.hgetall(engine.keys.throughput).items()}
    minute = int(engine.client.time()[0]) // 60
    slot = minute % 60
    assert raw == {f"m{slot}": minute, f"s{slot}": 2, f"f{slot}": 1}


def test_a_throughput_slot_is_reset_when_a_new_minute_reaches_it(engine: Engine):
    minute = int(engine.client.time()[0]) // 60
    slot = minute % 60
    engine.client.hset(engine.keys.throughput, mapping={f"m{slot}": minute - 60, f"s{slot}": 9})
    failed_job(engine)
    raw = engine.client.hgetall(engine.keys.throughput)
    assert raw[f"s{slot}".encode()] == b"0"
    assert raw[f"f{slot}".encode()] == b"1"


def test_kept_successes_are_listed_newest_last_and_capped(engine: Engine):
    ids = []
    for _ in range(3):
        job_id = engine.add()
        engine.reserve_id()
        engine.ack(job_id)
        ids.append(job_id)
    assert set(engine.zset(engine.keys.succeeded)) == set(ids)
    engine.client.zadd(engine.keys.succeeded, {f"x{i}": 1 for i in range(1000)})
    job_id = engine.add()
    engine.reserve_id()
    engine.ack(job_id)
    assert engine.client.zcard(engine.keys.succeeded) == 1000
