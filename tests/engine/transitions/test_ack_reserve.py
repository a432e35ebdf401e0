"""ack_reserve: ack one job and reserve the next in one call, each exactly as ack and reserve."""

from __future__ import annotations

import pytest

from django_rqueue import LeaseLost
from tests.support import transitions
from tests.support.engine import Engine


def ack_reserve(
    engine: Engine, job_id: str, token: int | None = None, result: str = "7", count: int = 1
) -> tuple[LeaseLost | None, list[transitions.Reservation]]:
    """The ack's verdict and the jobs reserved (this queue has no rate limit: no wait)."""
    token = engine.token(job_id) if token is None else token
    stale, reserved = transitions.ack_and_reserve(
        engine.client,
        engine.keys,
        job_id,
        token,
        result,
        600,
        lease_ms=30_000,
        worker_id="w2",
        count=count,
    )
    assert reserved.wait_ms == 0
    return stale, reserved.jobs


def test_acks_the_job_and_reserves_the_next_in_reserve_order(engine: Engine):
    first = engine.add(group="a")
    low = engine.add(group="b", priority=-5)
    high = engine.add(group="c", priority=5)
    assert engine.reserve_id() == high
    stale, reserved = ack_reserve(engine, high)
    assert stale is None
    assert engine.job(high)["s"] == "succeeded"
    assert engine.job(high)["result"] == "7"
    assert len(reserved) == 1
    job_id, fields = reserved[0]
    assert job_id == first  # priority 0 before -5
    assert fields[b"s"] == b"running"
    assert fields[b"worker"] == b"w2"
    assert fields[b"attempts"] == b"1" and fields[b"token"] == b"1"
    assert set(engine.zset(engine.keys.reserved)) == {first}
    assert engine.stats()["succeeded"] == 1
    assert engine.lrange(engine.keys.group(-5, "b")) == [low]
    engine.check_invariants()


def test_nothing_queued_acks_and_reserves_nothing(engine: Engine):
    job_id = engine.add()
    engine.reserve_id()
    engine.client.rpush(engine.keys.notify, "1")
    stale, reserved = ack_reserve(engine, job_id)
    assert (stale, reserved) == (None, [])
    assert engine.state(job_id) == "succeeded"
    assert engine.client.llen(engine.keys.notify) == 0  # cleared, as by reserve
    engine.check_invariants()


def test_a_stale_ack_changes_nothing_and_still_hands_out_the_next_job(engine: Engine):
    job_id = engine.add()
    waiting = engine.add()
    engine.reserve_id()
    before = engine.job(job_id)
    stale, reserved = ack_reserve(engine, job_id, token=99)
    assert isinstance(stale, LeaseLost)
    assert "stale fencing token" in str(stale)
    assert engine.job(job_id) == before  # not acked
    assert [r[0] for r in reserved] == [waiting]  # never dropped
    engine.check_invariants()


def test_bad_arguments_are_refused_before_any_write(engine: Engine):
    job_id = engine.add()
    engine.add()
    engine.reserve_id()
    before = engine.snapshot()
    with pytest.raises(Exception, match="bad lease"):
        transitions.ack_and_reserve(
            engine.client, engine.keys, job_id, 1, "null", 600, lease_ms=0, worker_id="w"
        )
    with pytest.raises(Exception, match="bad result TTL"):
        transitions.ack_and_reserve(
            engine.client, engine.keys, job_id, 1, "null", -1, lease_ms=1000, worker_id="w"
        )
    with pytest.raises(Exception, match="bad count"):
        transitions.ack_and_reserve(
            engine.client, engine.keys, job_id, 1, "null", 600, lease_ms=1, worker_id="w", count=0
        )
    assert engine.snapshot() == before


def test_acks_and_reserves_a_batch_each_with_its_own_token_and_lease(engine: Engine):
    running = engine.add(group="a")
    queued = [engine.add(group=g) for g in ("a", "b", "a", "b", "c")]
    engine.reserve_id()
    engine.client.hset(engine.keys.job(queued[1]), "token", 6)  # reserved before (token 6)
    stale, reserved = ack_reserve(engine, running, count=4)
    assert stale is None
    ids = [job_id for job_id, _ in reserved]
    # Round-robin between groups (ring b, c, a after the first reservation took a's head),
    # as four reserve calls would have done.
    assert ids == [queued[1], queued[4], queued[0], queued[3]]
    tokens = [fields[b"token"] for _, fields in reserved]
    assert tokens == [b"7", b"1", b"1", b"1"]
    assert set(engine.zset(engine.keys.reserved)) == set(ids)
    assert engine.lrange(engine.keys.group(0, "a")) == [queued[2]]
    engine.check_invariants()


def test_a_repeated_call_by_the_same_holder_counts_as_acked(engine: Engine):
    # redis-py resends a command whose reply timed out: the ack was applied once.
    job_id = engine.add()
    engine.reserve_id()
    token = engine.token(job_id)
    assert ack_reserve(engine, job_id, token=token)[0] is None
    stale, reserved = ack_reserve(engine, job_id, token=token)
    assert stale is None and reserved == []
    assert engine.stats()["succeeded"] == 1


def test_a_resent_ack_reserve_call_returns_the_same_next_jobs(engine: Engine):
    job_id = engine.add()
    waiting = [engine.add() for _ in range(3)]
    engine.reserve_id()
    token = engine.token(job_id)

    def call() -> tuple[LeaseLost | None, transitions.Reserved]:
        return transitions.ack_and_reserve(
            engine.client,
            engine.keys,
            job_id,
            token,
            "1",
            600,
            lease_ms=30_000,
            worker_id="w2",
            count=2,
            request_id="req",
        )

    stale, first = call()
    before = engine.snapshot()
    stale_again, again = call()  # as redis-py resends it after a lost reply
    assert (stale, stale_again) == (None, None)  # the repeated ack reads as applied
    assert [r[0] for r in again.jobs] == [r[0] for r in first.jobs] == waiting[:2]
    assert engine.snapshot() == before
    assert engine.stats()["succeeded"] == 1
