"""Per-group concurrency: reserve's ``group_concurrency`` cap, parked groups, and every
transition that ends a run giving its slot back (include/group_slot_*.lua, park_group.lua)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis

from django_rqueue import LeaseLost
from django_rqueue.engine import calls
from django_rqueue.engine.keys import new_job_id
from django_rqueue.engine.scripts import load
from tests.support import transitions
from tests.support.engine import Engine
from tests.support.waiting import wait_until


def letters(engine: Engine, ids: list[str]) -> str:
    """The groups of ``ids`` in order, one letter each (upper case), as in the round-robin test."""
    return "".join(engine.group_of(job_id) for job_id in ids).upper()


def notify_tokens(engine: Engine) -> int:
    return int(engine.client.llen(engine.keys.notify))


def test_groups_below_the_cap_keep_the_round_robin_order_and_a_full_one_waits(engine: Engine):
    counts = {"a": 4, "b": 1, "c": 3, "d": 1}
    for group, n in counts.items():
        for _ in range(n):
            engine.add(group=group)
    # The round-robin order "ABCD AC AC A", cut where a and c each run 2: the cap is 2.
    assert letters(engine, engine.drain(cap=2)) == "ABCDAC"
    assert engine.running_per_group() == {"a": 2, "b": 1, "c": 2, "d": 1}
    assert engine.full_groups() == {"a", "c"}
    assert (engine.parked("a"), engine.parked("c")) == ({0}, {0})
    assert engine.zset(engine.keys.prios) == {}  # nothing a reserve could take
    engine.check_invariants()


def test_other_groups_take_turns_while_one_group_sits_at_its_cap(engine: Engine):
    for group, n in {"a": 3, "b": 2, "c": 2, "d": 2}.items():
        for _ in range(n):
            engine.add(group=group)
    long = engine.reserve_id(cap=1)
    assert engine.group_of(long) == "a"
    order = []
    while (got := engine.reserve(cap=1)) is not None:
        order.append(got[0])
        engine.ack(got[0])  # each short job ends at once: b, c and d never wait
    assert letters(engine, order) == "BCDBCD"
    engine.ack(long)
    assert letters(engine, engine.drain(cap=1)) == "A"
    engine.check_invariants()


def test_the_default_group_is_capped_like_any_other(engine: Engine):
    first, second = engine.add(), engine.add()
    assert engine.reserve_id(cap=1) == first
    assert engine.reserve(cap=1) is None
    assert engine.full_groups() == {""} and engine.parked("") == {0}
    engine.ack(first)
    assert engine.reserve_id(cap=1) == second
    engine.check_invariants()


def test_a_batch_counts_each_job_against_the_cap_as_it_goes(engine: Engine):
    ids = [engine.add(group="a") for _ in range(5)] + [engine.add(group="b")]
    got = transitions.reserve_many(
        engine.client, engine.keys, lease_ms=30_000, worker_id="w", count=10, group_concurrency=2
    ).jobs
    assert [job_id for job_id, _ in got] == [ids[0], ids[5], ids[1]]
    assert all(fields[b"gc"] == b"1" for _, fields in got)
    engine.check_invariants()


def end_by_ack(engine: Engine, job_id: str) -> None:
    engine.ack(job_id)


def end_by_final_failure(engine: Engine, job_id: str) -> None:
    assert engine.fail(job_id)[0] == "failed"


def end_by_failure_with_a_retry(engine: Engine, job_id: str) -> None:
    assert engine.fail(job_id, retry_ms=3_600_000)[0] == "retrying"


def end_by_release(engine: Engine, job_id: str) -> None:
    engine.release(job_id)


#: Each transition that ends a run, the state it leaves the job in, and the wake-up
#: tokens it leaves: one for the unparked group (a release also queues its job again).
ENDS: dict[str, tuple[Callable[[Engine, str], None], str, int]] = {
    "ack": (end_by_ack, "succeeded", 1),
    "fail, final": (end_by_final_failure, "failed", 1),
    "fail, retry": (end_by_failure_with_a_retry, "scheduled", 1),
    "release": (end_by_release, "queued", 2),
}


@pytest.mark.parametrize("end", list(ENDS))
def test_each_end_of_a_run_gives_the_slot_back_and_unparks_the_group(engine: Engine, end: str):
    finish, state, tokens = ENDS[end]
    first, second = engine.add(group="a"), engine.add(group="a")
    other = engine.add(group="b")
    assert engine.reserve_id(cap=1) == first
    assert engine.parked("a") == {0}
    engine.client.delete(engine.keys.notify)

    finish(engine, first)

    assert engine.state(first) == state
    assert "gc" not in engine.job(first)
    assert engine.running_per_group() == {}
    assert engine.full_groups() == set() and engine.parked("a") == set()
    assert notify_tokens(engine) == tokens  # an idle worker wakes for the unparked group
    engine.check_invariants()
    # Back at the tail of the ring: b first, then a's next job (a release put `first`
    # back behind `second`).
    assert engine.drain(cap=1)[:2] == [other, second]
    engine.check_invariants()


@pytest.mark.parametrize("attempts", [3, 1])
def test_reclaiming_an_expired_lease_gives_the_slot_back(engine: Engine, attempts: int):
    first = engine.add(group="a", max_attempts=attempts)
    second = engine.add(group="a")
    assert engine.reserve_id(lease_ms=1, cap=1) == first
    assert engine.parked("a") == {0}
    engine.client.delete(engine.keys.notify)

    wait_until(lambda: sum(engine.reclaim()[:2]) == 1, message="lease reclaimed")

    assert engine.state(first) == ("queued" if attempts > 1 else "failed")
    assert engine.running_per_group() == {} and engine.full_groups() == set()
    assert notify_tokens(engine) >= 1
    engine.check_invariants()
    assert engine.reserve_id(cap=1) == second  # requeued at the tail, behind it
    engine.check_invariants()


def test_ack_reserve_gives_the_slot_back_before_it_reserves(engine: Engine):
    first, second = engine.add(group="a"), engine.add(group="a")
    assert engine.reserve_id(cap=1) == first
    stale, reserved = transitions.ack_and_reserve(
        engine.client,
        engine.keys,
        first,
        engine.token(first),
        "null",
        600,
        lease_ms=30_000,
        worker_id="w",
        group_concurrency=1,
    )
    assert stale is None
    assert [job_id for job_id, _ in reserved.jobs] == [second]
    assert engine.running_per_group() == {"a": 1}
    engine.check_invariants()


def test_a_stale_report_gives_no_slot_back(engine: Engine):
    first, second = engine.add(group="a", max_attempts=3), engine.add(group="a")
    assert engine.reserve_id(lease_ms=1, cap=1) == first
    wait_until(lambda: engine.reclaim()[0] == 1, message="lease reclaimed")
    engine.drain(cap=1)  # second runs now and holds the slot
    with pytest.raises(LeaseLost):
        engine.ack(first, token=1)  # the reclaimed attempt reports late
    assert engine.running_per_group() == {"a": 1}
    assert engine.state(second) == "running"
    engine.check_invariants()


def enqueue_one(engine: Engine, priority: int) -> None:
    engine.add(group="a", priority=priority)


def enqueue_a_batch(engine: Engine, priority: int) -> None:
    items = [transitions.BatchItem(new_job_id("default"), "", "{}") for _ in range(2)]
    fields: dict[str, str | int] = {"n": "tests.noop", "max": 3, "tmo": 1000, "ttl": 60}
    shared = calls.EnqueueShared(engine.keys, (priority, "a", 0, -1), 0, tuple(calls.pairs(fields)))
    transitions.enqueue_batch(engine.client, shared.batch(), items)


def promote_a_due_job(engine: Engine, priority: int) -> None:
    engine.add(group="a", priority=priority, delay_ms=1)
    wait_until(lambda: engine.promote()[0] == 1, message="scheduled job promoted")


def run_a_scheduled_job_now(engine: Engine, priority: int) -> None:
    job_id = engine.add(group="a", priority=priority, delay_ms=3_600_000)
    transitions.run_now(engine.client, engine.keys, job_id)


#: The ways a job reaches a group's queue (each through include/push_queued_many.lua).
PUSHES: dict[str, Callable[[Engine, int], None]] = {
    "enqueue": enqueue_one,
    "enqueue_batch": enqueue_a_batch,
    "promote": promote_a_due_job,
    "run_now": run_a_scheduled_job_now,
}


@pytest.mark.parametrize("push", list(PUSHES))
def test_jobs_queued_for_a_full_group_are_parked_and_wake_nobody(engine: Engine, push: str):
    running = engine.add(group="a")  # a's only job: a is full with nothing queued
    assert engine.reserve_id(cap=1) == running
    assert engine.full_groups() == {"a"} and engine.parked("a") == set()
    engine.client.delete(engine.keys.notify)

    PUSHES[push](engine, 0)  # into an empty list
    PUSHES[push](engine, 5)  # and at another priority

    assert engine.parked("a") == {0, 5}
    assert engine.zset(engine.keys.prios) == {}
    assert notify_tokens(engine) == 0
    assert engine.reserve(cap=1) is None
    engine.check_invariants()
    other = engine.add(group="b")
    assert engine.reserve_id(cap=1) == other
    engine.client.delete(engine.keys.notify)

    engine.ack(running)
    assert engine.parked("a") == set()
    assert set(engine.zset(engine.keys.prios)) == {"0", "5"}
    assert notify_tokens(engine) == 1
    assert engine.job(engine.reserve_id(cap=1))["prio"] == "5"
    engine.check_invariants()


def test_cancelling_a_parked_groups_queued_jobs_unparks_nothing_stale(engine: Engine):
    running = engine.add(group="a")
    queued = [engine.add(group="a") for _ in range(2)]
    assert engine.reserve_id(cap=1) == running
    assert engine.parked("a") == {0}

    engine.cancel(queued[0])
    assert engine.parked("a") == {0}  # one still waits
    engine.check_invariants()
    engine.cancel(queued[1], mode="delete")
    assert engine.parked("a") == set()
    assert not engine.client.exists(engine.keys.group(0, "a"))
    engine.check_invariants()

    engine.client.delete(engine.keys.notify)
    engine.ack(running)
    assert engine.full_groups() == set()
    assert notify_tokens(engine) == 0  # nothing came back to run
    assert engine.reserve(cap=1) is None
    engine.check_invariants()


def test_ten_thousand_parked_groups_are_not_walked_by_a_reserve(engine: Engine):
    """Each group reaches the cap with a job still queued, so it is parked at once; a
    reserve then costs what it costs on a queue of one group (INFO commandstats)."""
    groups = 10_000
    pipe = engine.server().pipeline(transaction=False)
    script = load("enqueue")
    script.ensure_loaded(engine.client)
    for n in range(groups):
        for k in range(2):
            job = calls.NewJob(f"default:{n:011d}{k:011d}", 0, f"g{n}", "", 0, {"n": "tests.noop"})
            call = calls.enqueue(engine.keys, job, delay_ms=0, run_at_ms=-1)
            script.queue_in(pipe, call.keys, call.args)
    pipe.execute()
    for _ in range(groups // 1000):
        got = transitions.reserve_many(
            engine.client,
            engine.keys,
            lease_ms=60_000,
            worker_id="w",
            count=1000,
            group_concurrency=1,
        )
        assert len(got.jobs) == 1000
    assert engine.client.scard(engine.keys.groupfull) == groups
    assert engine.zset(engine.keys.prios) == {}
    fresh = engine.add(group="fresh")

    engine.server().config_resetstat()
    assert engine.reserve_id(cap=1) == fresh
    stats: dict[str, Any] = engine.server().info("commandstats")
    ran = {name: value["calls"] for name, value in stats.items() if isinstance(value, dict)}
    assert ran.get("cmdstat_lpop") == 2  # one group, one job: nothing else popped
    assert sum(ran.values()) < 30, ran


def test_a_reserve_stops_after_a_bounded_walk_and_leaves_a_token(engine: Engine):
    """Groups that reached the cap at another priority are still in this priority's ring:
    a reserve parks at most 100 of them, then returns nothing and leaves a wake-up token,
    and the next reserve goes on where it stopped."""
    for n in range(150):
        engine.add(group=f"g{n}", priority=5)
        engine.add(group=f"g{n}", priority=0)
    for _ in range(150):
        assert engine.job(engine.reserve_id(cap=1))["prio"] == "5"
    fresh = engine.add(group="fresh")
    engine.client.delete(engine.keys.notify)

    assert engine.reserve(cap=1) is None
    assert notify_tokens(engine) == 1
    assert len(engine.lrange(engine.keys.ring(0))) == 51  # 100 parked, 50 more and fresh
    engine.check_invariants()
    assert engine.reserve_id(cap=1) == fresh
    assert sum(len(engine.parked(f"g{n}")) for n in range(150)) == 150
    engine.check_invariants()


def test_jobs_reserved_without_a_cap_hold_no_slot(engine: Engine):
    """A cap added (or removed) between deploys: only the jobs counted at reserve are
    uncounted at their end, so no count is left behind."""
    uncounted = engine.add(group="a")
    counted = [engine.add(group="a") for _ in range(2)]
    assert engine.reserve_id() == uncounted
    assert "gc" not in engine.job(uncounted)
    assert engine.reserve_id(cap=1) == counted[0]
    assert engine.running_per_group() == {"a": 1}
    engine.ack(uncounted)
    assert engine.running_per_group() == {"a": 1}
    assert engine.parked("a") == {0}
    engine.ack(counted[0])
    assert engine.running_per_group() == {}
    # With the cap gone, the group's jobs are reserved again without counting.
    assert engine.reserve_id() == counted[1]
    assert engine.running_per_group() == {}
    engine.check_invariants()


def test_a_lowered_cap_parks_a_group_that_is_over_it(engine: Engine):
    ids = [engine.add(group="a") for _ in range(4)]
    assert [engine.reserve_id(cap=3) for _ in range(2)] == ids[:2]
    assert engine.parked("a") == set()  # 2 of 3 run: a is still in the ring
    assert engine.reserve(cap=1) is None  # over the new cap: parked on the way
    assert engine.parked("a") == {0}
    engine.check_invariants()
    engine.ack(ids[0])  # 1 still runs: unparked, then parked again by the next reserve
    assert engine.parked("a") == set()
    assert engine.reserve(cap=1) is None
    assert engine.parked("a") == {0}
    engine.ack(ids[1])
    assert engine.reserve_id(cap=1) == ids[2]
    engine.check_invariants()


@pytest.mark.parametrize("cap", [-1, 1.5])
def test_a_bad_cap_is_refused_and_nothing_is_reserved(engine: Engine, cap: Any):
    engine.add(group="a")
    with pytest.raises(redis.ResponseError, match="bad group cap"):
        engine.reserve(cap=cap)
    assert engine.stats()["queued"] == 1
