"""A queue's rate limit in the reserving scripts: GCRA on the Redis clock (include/rate_*.lua).

Times are steered through the queue's one piece of state, the theoretical
arrival time (TAT) in ``<base>rate``, set relative to Redis ``TIME``; the
scripts read the clock once per call, so the arithmetic is exact within a
call and bounded by the few milliseconds between two calls across calls.
"""

from __future__ import annotations

import asyncio

import pytest
import redis

from django_rqueue.conf import RateLimit
from django_rqueue.engine import calls
from django_rqueue.engine.connection import new_async_client
from django_rqueue.engine.scripts import load
from tests.support import transitions
from tests.support.engine import Engine

#: One job a minute: 60 000 ms apart, so no test ever gets a second slot by waiting.
PER_MINUTE = RateLimit.parse("1/m")
#: Slack (ms) for the time between a test's TIME and a script's, on a slow machine.
SLACK = 1000


def reserve(
    engine: Engine, rate: RateLimit | None, count: int, worker: str = "w1"
) -> transitions.Reserved:
    return transitions.reserve_many(
        engine.client,
        engine.keys,
        lease_ms=30_000,
        worker_id=worker,
        count=count,
        rate_limit=rate,
    )


def ack_reserve(engine: Engine, job_id: str, rate: RateLimit, count: int) -> transitions.Reserved:
    stale, reserved = transitions.ack_and_reserve(
        engine.client, engine.keys, job_id, engine.token(job_id), "1", 600,
        lease_ms=30_000, worker_id="w1", count=count, rate_limit=rate,
    )  # fmt: skip
    assert stale is None
    return reserved


def tat(engine: Engine) -> float | None:
    value = engine.client.get(engine.keys.rate)
    return None if value is None else float(value)


@pytest.mark.parametrize(
    ("rate", "burst"),
    [("1000/s", 51), ("100/s", 6), ("6000/m", 6), ("20/s", 2), ("3/s", 1), ("1000/h", 1)],
)
def test_an_idle_queue_hands_out_its_burst_at_once_then_says_when_the_next_slot_is(
    engine: Engine, rate: str, burst: int
):
    limit = RateLimit.parse(rate)
    assert limit.burst == burst  # what the README and the fairness page promise
    ids = [engine.add() for _ in range(burst + 3)]
    before = engine.now_ms()
    got = reserve(engine, limit, count=burst + 3)
    assert [job_id for job_id, _ in got.jobs] == ids[:burst]
    # TAT moved on by one interval per job, from the call's clock; the next job may go
    # `tolerance` before it: exactly (in whole ms) burst * interval - tolerance after now.
    stored = tat(engine)
    assert stored is not None
    now = stored - burst * limit.interval_ms
    assert before - 0.01 <= now <= engine.now_ms() + 0.01
    assert got.wait_ms == pytest.approx(burst * limit.interval_ms - limit.tolerance_ms, abs=1)
    # The key expires when its TAT passes: an idle queue leaves nothing behind.
    assert 0 < engine.client.pttl(engine.keys.rate) <= burst * limit.interval_ms + 1
    engine.check_invariants()


def test_every_worker_shares_the_slots_and_a_held_back_call_spends_none(engine: Engine):
    ids = [engine.add() for _ in range(3)]
    first = reserve(engine, PER_MINUTE, count=3, worker="w1")
    assert [job_id for job_id, _ in first.jobs] == ids[:1]
    assert 60_000 - 50 - SLACK <= first.wait_ms <= 60_000 - 50
    after_first = tat(engine)
    other = reserve(engine, PER_MINUTE, count=1, worker="w2")  # another worker, at once
    assert other.jobs == []
    assert 60_000 - 50 - SLACK <= other.wait_ms <= first.wait_ms
    assert tat(engine) == after_first  # asking spends nothing
    assert {engine.state(i) for i in ids[1:]} == {"queued"}
    engine.check_invariants()


def test_a_call_that_finds_nothing_queued_spends_no_slot_and_reports_no_wait(engine: Engine):
    engine.client.rpush(engine.keys.notify, "1")
    assert reserve(engine, PER_MINUTE, count=5) == transitions.Reserved([], 0)
    assert not engine.client.exists(engine.keys.rate)
    assert not engine.client.exists(engine.keys.notify)  # cleared, as for any empty reserve
    job_id = engine.add()
    got = reserve(engine, PER_MINUTE, count=5)  # the slot is still there
    assert ([j for j, _ in got.jobs], got.wait_ms) == ([job_id], 0)


def test_a_queue_that_runs_dry_reports_no_wait_and_spends_only_what_it_handed_out(
    engine: Engine,
):
    limit = RateLimit.parse("100/s")  # 10 ms apart, a burst of 6
    ids = [engine.add() for _ in range(2)]
    before = engine.now_ms()
    got = reserve(engine, limit, count=10)
    after = engine.now_ms()
    assert [job_id for job_id, _ in got.jobs] == ids
    assert got.wait_ms == 0  # fewer than asked because the queue ran dry, not the limit
    stored = tat(engine)
    assert stored is not None and before + 20 <= stored <= after + 20  # two slots, not six


def test_jobs_held_by_their_group_concurrency_spend_no_slot_and_ask_for_no_wait(
    engine: Engine,
):
    limit = RateLimit.parse("100/s")  # 10 ms apart, a burst of 6
    ids = [engine.add(group="a") for _ in range(3)]
    before = engine.now_ms()
    got = transitions.reserve_many(
        engine.client, engine.keys, lease_ms=30_000, worker_id="w", count=5,
        group_concurrency=1, rate_limit=limit,
    )  # fmt: skip
    after = engine.now_ms()
    # One job: the others wait for their group's slot, not for the rate limit.
    assert ([j for j, _ in got.jobs], got.wait_ms) == ([ids[0]], 0)
    stored = tat(engine)
    assert stored is not None and before + 10 <= stored <= after + 10  # one slot spent
    engine.check_invariants()


def test_a_held_back_call_on_a_queue_with_jobs_leaves_the_wake_up_tokens(engine: Engine):
    engine.add(), engine.add()
    reserve(engine, PER_MINUTE, count=1)
    tokens = engine.client.llen(engine.keys.notify)
    assert tokens > 0
    assert reserve(engine, PER_MINUTE, count=1).jobs == []
    assert engine.client.llen(engine.keys.notify) == tokens  # the jobs are still to do


def test_the_next_slot_is_read_from_the_tat_on_the_redis_clock(engine: Engine):
    limit = RateLimit.parse("1/s")  # 1000 ms apart, tolerance 50 ms
    engine.add()
    engine.client.set(engine.keys.rate, engine.now_ms() + 400)
    got = reserve(engine, limit, count=1)
    assert got.jobs == []
    assert 0 < got.wait_ms <= 350  # TAT - tolerance - now
    # Once TAT - tolerance has passed the job goes, and TAT moves on by one interval.
    engine.client.set(engine.keys.rate, engine.now_ms() + 40)
    before = tat(engine)
    got = reserve(engine, limit, count=1)
    after, moved = engine.now_ms(), tat(engine)
    assert len(got.jobs) == 1 and got.wait_ms == 0  # got all it asked for
    # From TAT, or from now if the call came after TAT (a slow machine).
    assert before is not None and moved is not None
    assert before + 1000 <= moved <= max(before, after) + 1000


def test_a_tat_too_far_ahead_for_the_rate_restarts_from_now(engine: Engine):
    # What a "1/h" limit leaves behind after the rate is raised to "10/s" (or the
    # Redis clock going back): not a 55-minute stall.
    engine.add(), engine.add()
    engine.client.set(engine.keys.rate, engine.now_ms() + 3_300_000)
    got = reserve(engine, RateLimit.parse("10/s"), count=2)
    assert len(got.jobs) == 1
    assert 0 < got.wait_ms <= 50


def test_ack_reserve_obeys_the_limit_and_says_when_the_next_slot_is(engine: Engine):
    running = engine.add()
    waiting = engine.add()
    assert [j for j, _ in reserve(engine, PER_MINUTE, count=1).jobs] == [running]
    got = ack_reserve(engine, running, PER_MINUTE, count=3)
    assert got.jobs == []
    assert 60_000 - 50 - SLACK <= got.wait_ms <= 60_000 - 50
    assert engine.state(running) == "succeeded"  # the ack was applied all the same
    assert engine.state(waiting) == "queued"
    engine.client.delete(engine.keys.rate)  # a minute later
    assert [j for j, _ in reserve(engine, PER_MINUTE, count=3).jobs] == [waiting]
    engine.check_invariants()


def test_the_async_reservations_obey_it_too(engine: Engine):
    ids = [engine.add() for _ in range(3)]

    async def areserve() -> transitions.Reserved:
        client = new_async_client(engine.queue)
        assert client is not None
        try:
            return await transitions.areserve_many(
                client, engine.keys, lease_ms=30_000, worker_id="w", count=3,
                rate_limit=PER_MINUTE,
            )  # fmt: skip
        finally:
            await client.aclose()

    got = asyncio.run(areserve())
    assert [j for j, _ in got.jobs] == ids[:1]
    assert got.wait_ms > 0


def test_a_paused_rate_limited_queue_spends_nothing(engine: Engine):
    engine.add()
    transitions.pause(engine.client, engine.keys)
    assert reserve(engine, PER_MINUTE, count=1) == transitions.Reserved([], 0)
    assert not engine.client.exists(engine.keys.rate)


def test_a_resent_request_returns_its_jobs_without_spending_more_slots(engine: Engine):
    engine.add(), engine.add()

    def call() -> transitions.Reserved:
        return transitions.reserve_many(
            engine.client, engine.keys, lease_ms=30_000, worker_id="w", count=2,
            request_id="req", rate_limit=PER_MINUTE,
        )  # fmt: skip

    first = call()
    spent = tat(engine)
    again = call()  # redis-py resends it after a lost reply
    assert [j for j, _ in again.jobs] == [j for j, _ in first.jobs]
    assert again.wait_ms == 0
    assert tat(engine) == spent


def test_an_unlimited_queue_never_touches_the_rate_key(engine: Engine):
    for _ in range(5):
        engine.add()
    got = reserve(engine, None, count=3)
    assert (len(got.jobs), got.wait_ms) == (3, 0)
    assert not engine.client.exists(engine.keys.rate)


@pytest.mark.parametrize("argv", [["0", "50"], ["-5", "50"], ["10", "-1"], ["10", "x"]])
@pytest.mark.parametrize("script", ["reserve", "ack_reserve"])
def test_bad_rate_limit_arguments_are_refused_before_any_write(
    engine: Engine, script: str, argv: list[str]
):
    job_id = engine.add()
    engine.add()
    engine.reserve_id()
    before = engine.snapshot()
    if script == "reserve":
        call = calls.reserve(engine.keys, lease_ms=1000, worker_id="w", count=1, request_id="r")
    else:
        call = calls.ack_reserve(
            engine.keys, job_id, 1, "null", 600, lease_ms=1000, worker_id="w", count=1,
            request_id="r",
        )  # fmt: skip
    with pytest.raises(redis.ResponseError, match="bad rate limit"):
        load(script)(engine.client, call.keys, [*call.args, *argv])
    assert engine.snapshot() == before
