"""pause.lua / resume.lua, and the paused flag every reserving script and every push obeys."""

from __future__ import annotations

import asyncio

from django_rqueue.engine.connection import new_async_client
from django_rqueue.engine.scripts import load
from tests.support import transitions
from tests.support.engine import Engine


def pause(engine: Engine) -> bool:
    return transitions.pause(engine.client, engine.keys)


def resume(engine: Engine) -> bool:
    return transitions.resume(engine.client, engine.keys)


def test_a_paused_queue_accepts_jobs_and_reserves_none(engine: Engine):
    before = engine.add()
    assert pause(engine) is True
    after = engine.add()
    assert engine.reserve() is None
    assert transitions.reserve_many(
        engine.client, engine.keys, lease_ms=30_000, worker_id="w", count=10
    ) == transitions.Reserved([], 0)
    assert {engine.state(before), engine.state(after)} == {"queued"}
    engine.check_invariants()
    assert resume(engine) is True
    assert engine.drain() == [before, after]


def test_the_async_reservations_of_async_jobs_obey_it_too(engine: Engine):
    job_id = engine.add()
    pause(engine)

    async def reserve() -> list[transitions.Reservation]:
        client = new_async_client(engine.queue)
        assert client is not None
        try:
            reserved = await transitions.areserve_many(
                client, engine.keys, lease_ms=30_000, worker_id="w", count=5
            )
            return reserved.jobs
        finally:
            await client.aclose()

    assert asyncio.run(reserve()) == []
    resume(engine)
    assert [r[0] for r in asyncio.run(reserve())] == [job_id]


def test_ack_reserve_acks_but_reserves_nothing_while_paused(engine: Engine):
    running = engine.add()
    waiting = engine.add()
    assert engine.reserve_id() == running
    pause(engine)
    stale, reserved = transitions.ack_and_reserve(
        engine.client, engine.keys, running, engine.token(running), "1", 600,
        lease_ms=30_000, worker_id="w1", count=5,
    )  # fmt: skip
    assert stale is None and reserved == transitions.Reserved([], 0)
    assert engine.state(running) == "succeeded"
    assert engine.state(waiting) == "queued"


def test_running_jobs_still_renew_fail_and_release_while_paused(engine: Engine):
    first, second = engine.add(), engine.add()
    engine.reserve_id(), engine.reserve_id()
    pause(engine)
    transitions.renew_lease(engine.client, engine.keys, first, engine.token(first), 30_000)
    assert engine.fail(first, retry_ms=-1)[0] == "failed"
    transitions.release(engine.client, engine.keys, second, engine.token(second))
    assert engine.state(second) == "queued"
    assert engine.reserve() is None
    engine.check_invariants()


def make_due(engine: Engine, job_id: str) -> None:
    """Move a scheduled job's run-at into the past (promote reads only the zset)."""
    engine.client.zadd(engine.keys.delayed, {job_id: 0}, xx=True)


def test_due_jobs_are_promoted_into_a_paused_queue_and_wait_there(engine: Engine):
    pause(engine)
    job_id = engine.add(delay_ms=60_000)
    make_due(engine, job_id)
    assert engine.promote() == (1, -1)
    assert engine.state(job_id) == "queued"
    assert engine.reserve() is None
    engine.check_invariants()


def test_a_paused_queue_leaves_no_wake_up_tokens_and_resume_leaves_one_per_job(engine: Engine):
    engine.client.rpush(engine.keys.notify, "1")
    pause(engine)
    assert not engine.client.exists(engine.keys.notify)  # announced jobs nobody may take
    for _ in range(3):
        engine.add()
    make_due(engine, engine.add(delay_ms=60_000))
    assert engine.promote()[0] == 1
    assert engine.client.llen(engine.keys.notify) == 0  # idle workers stay asleep
    assert resume(engine) is True
    assert engine.client.llen(engine.keys.notify) == 4


def test_resume_wakes_at_most_64_and_only_for_queued_jobs(engine: Engine):
    pause(engine)
    assert resume(engine) is True
    assert not engine.client.exists(engine.keys.notify)  # nothing queued: nobody woken
    for _ in range(70):
        engine.add()
    pause(engine)
    resume(engine)
    assert engine.client.llen(engine.keys.notify) == 64


def test_pause_and_resume_say_whether_they_changed_anything(engine: Engine):
    assert resume(engine) is False
    assert pause(engine) is True
    since = engine.client.get(engine.keys.paused)
    assert since is not None and abs(int(since) - engine.now_ms()) < 60_000
    assert pause(engine) is False
    assert engine.client.get(engine.keys.paused) == since  # the first pause's time is kept
    assert resume(engine) is True
    assert not engine.client.exists(engine.keys.paused)


def test_a_resent_reserve_still_gets_the_jobs_it_reserved_before_the_pause(engine: Engine):
    job_id = engine.add()

    def reserve() -> list[transitions.Reservation]:
        return transitions.reserve_many(
            engine.client, engine.keys, lease_ms=30_000, worker_id="w1", count=1, request_id="r1"
        ).jobs

    first = reserve()
    pause(engine)
    again = reserve()
    assert [r[0] for r in first] == [r[0] for r in again] == [job_id]


def test_every_reserving_script_reads_the_flag_through_reserve_batch():
    for name in ("reserve", "ack_reserve"):
        assert "base .. 'paused'" in load(name).source
        assert "local function reserve_batch(" in load(name).source
