"""reserve.lua: strict priority, round-robin between groups, FIFO within a group, the lease."""

from __future__ import annotations

import pytest
import redis

from tests.support import transitions
from tests.support.engine import Engine


def test_reserve_of_an_empty_queue_returns_none_and_clears_notify(engine: Engine):
    engine.client.rpush(engine.keys.notify, "1")
    assert engine.reserve() is None
    assert not engine.client.exists(engine.keys.notify)


def test_jobs_of_one_group_come_out_oldest_first(engine: Engine):
    ids = [engine.add(group="user:1") for _ in range(10)]
    assert engine.drain() == ids


def test_jobs_without_a_group_share_one_fifo(engine: Engine):
    ids = [engine.add() for _ in range(5)]
    assert engine.drain() == ids


def test_higher_priority_always_goes_first_across_groups(engine: Engine):
    low = [engine.add(priority=-10, group=g) for g in "ab"]
    mid = [engine.add(priority=0, group=g) for g in "abc"]
    high = [engine.add(priority=100, group=g) for g in "ba"]
    top = engine.add(priority=5, group="z")
    order = engine.drain()
    assert order == high + [top] + mid + low


def test_a_new_higher_priority_job_jumps_ahead_of_waiting_ones(engine: Engine):
    first, second = engine.add(group="a"), engine.add(group="a")
    assert engine.reserve_id() == first
    urgent = engine.add(priority=1, group="b")
    assert engine.drain() == [urgent, second]


def test_extreme_priorities_are_ordered_numerically_not_as_text(engine: Engine):
    ids = {p: engine.add(priority=p) for p in (9, -100, 100, 10, -9, 0)}
    assert engine.drain() == [ids[p] for p in (100, 10, 9, 0, -9, -100)]


def test_round_robin_order_between_groups_exactly(engine: Engine):
    counts = {"a": 8, "b": 9, "c": 4, "d": 5, "e": 2}
    groups = {}
    for group, n in counts.items():  # all a's first, then all b's, ...
        for _ in range(n):
            groups[engine.add(group=group)] = group
    order = "".join(groups[job_id] for job_id in engine.drain()).upper()
    rounds = "ABCDE ABCDE ABCD ABCD ABD AB AB AB B".replace(" ", "")
    assert order == rounds
    engine.check_invariants()


def test_round_robin_keeps_fifo_inside_each_group(engine: Engine):
    per_group: dict[str, list[str]] = {"x": [], "y": []}
    for _ in range(4):
        for group in per_group:
            per_group[group].append(engine.add(group=group))
    order = engine.drain()
    for ids in per_group.values():
        assert [i for i in order if i in ids] == ids


def test_a_group_that_empties_and_refills_rejoins_at_the_tail_of_the_ring(engine: Engine):
    a1 = engine.add(group="a")
    b1, b2 = engine.add(group="b"), engine.add(group="b")
    assert engine.reserve_id() == a1  # a is now empty and left the ring
    a2 = engine.add(group="a")  # joins behind b
    assert engine.drain() == [b1, a2, b2]


def test_reserve_marks_the_job_running_with_a_lease_and_a_new_token(engine: Engine):
    job_id = engine.add(group="g", priority=3)
    before = engine.now_ms()
    got = engine.reserve(lease_ms=5000)
    after = engine.now_ms()
    assert got is not None
    assert got[0] == job_id
    fields = got[1]
    assert fields == engine.job_like(engine.keys.job(job_id))  # the reply carries the whole hash
    assert fields["s"] == "running"
    assert fields["attempts"] == "1"
    assert fields["token"] == "1"
    assert fields["worker"] == "w1"
    assert before <= int(fields["started_at"]) <= after
    deadline = engine.zset(engine.keys.reserved)[job_id]
    assert before + 5000 <= deadline <= after + 5000
    assert engine.stats()["queued"] == 0
    engine.check_invariants()


def test_each_reservation_raises_attempts_and_token(engine: Engine):
    job_id = engine.add(max_attempts=5)
    for n in (1, 2, 3):
        assert engine.reserve_id() == job_id
        job = engine.job(job_id)
        assert (job["attempts"], job["token"]) == (str(n), str(n))
        engine.fail(job_id, retry_ms=0)
        assert engine.promote()[0] == 1


def test_reserve_skips_ids_whose_record_vanished(engine: Engine):
    gone, kept = engine.add(), engine.add()
    engine.client.delete(engine.keys.job(gone))  # behind the queue's back
    assert engine.reserve_id() == kept
    assert engine.reserve() is None
    assert engine.stats()["queued"] == 0


@pytest.mark.parametrize("lease_ms", [0, -5, "soon"])
def test_a_bad_lease_is_refused_before_anything_moves(engine: Engine, lease_ms: object):
    engine.add()
    before = engine.snapshot()
    with pytest.raises(redis.ResponseError, match="bad lease"):
        engine.reserve(lease_ms=lease_ms)  # type: ignore[arg-type]
    assert engine.snapshot() == before


def reserve_many(engine: Engine, lease_ms: int, count: int) -> list[transitions.Reservation]:
    got = transitions.reserve_many(
        engine.client, engine.keys, lease_ms=lease_ms, worker_id="w", count=count
    )
    assert got.wait_ms == 0  # no rate limit
    return got.jobs


def test_reserve_many_hands_out_jobs_in_reserve_order_each_with_its_own_lease(engine: Engine):
    ids = [engine.add(group=g, priority=p) for g, p in (("a", 0), ("a", 0), ("b", 0), ("c", 9))]
    before = engine.now_ms()
    got = reserve_many(engine, 5000, 3)
    assert [job_id for job_id, _ in got] == [ids[3], ids[0], ids[2]]
    assert all(fields[b"s"] == b"running" and fields[b"token"] == b"1" for _, fields in got)
    leases = engine.zset(engine.keys.reserved)
    assert set(leases) == {ids[3], ids[0], ids[2]}
    assert all(before + 5000 <= deadline <= engine.now_ms() + 5000 for deadline in leases.values())
    rest = reserve_many(engine, 5000, 3)
    assert [job_id for job_id, _ in rest] == [ids[1]]  # fewer than asked: the queue ran dry
    assert reserve_many(engine, 1, 5) == []
    engine.check_invariants()


def test_a_run_of_the_only_groups_jobs_comes_out_oldest_first_each_with_its_own_token(
    engine: Engine,
):
    ids = [engine.add(group="solo") for _ in range(8)]
    got = reserve_many(engine, 5000, 5)
    assert [job_id for job_id, _ in got] == ids[:5]
    assert all(fields[b"s"] == b"running" and fields[b"token"] == b"1" for _, fields in got)
    assert set(engine.zset(engine.keys.reserved)) == set(ids[:5])
    assert engine.stats()["queued"] == 3
    engine.check_invariants()  # the group, with jobs left, is back in its ring
    assert [job_id for job_id, _ in reserve_many(engine, 5000, 5)] == ids[5:]
    assert engine.stats()["queued"] == 0
    engine.check_invariants()


def test_a_run_takes_the_next_priority_once_the_top_one_runs_dry(engine: Engine):
    high = [engine.add(priority=5) for _ in range(3)]
    low = [engine.add(priority=0, group=g) for g in "ab"]
    got = reserve_many(engine, 5000, 10)
    assert [job_id for job_id, _ in got] == [*high, *low]
    engine.check_invariants()


def test_a_run_stops_at_a_job_it_cannot_reserve_and_the_rest_keep_their_order(engine: Engine):
    ids = [engine.add() for _ in range(6)]
    engine.client.delete(engine.keys.job(ids[1]))  # vanished behind the queue's back
    engine.client.hset(engine.keys.job(ids[3]), "s", "cancelled")  # no longer queued
    got = reserve_many(engine, 5000, 10)
    assert [job_id for job_id, _ in got] == [ids[0], ids[2], ids[4], ids[5]]
    assert engine.stats()["queued"] == 0
    assert not engine.client.exists(engine.keys.group(0, ""))
    engine.check_invariants()


def test_a_run_cut_short_by_the_count_leaves_the_rest_queued_in_order(engine: Engine):
    ids = [engine.add() for _ in range(5)]
    engine.client.delete(engine.keys.job(ids[0]))
    got = reserve_many(engine, 5000, 2)
    assert [job_id for job_id, _ in got] == ids[1:3]
    assert engine.stats()["queued"] == 2
    assert engine.drain() == ids[3:]
    engine.check_invariants()


@pytest.mark.parametrize("count", [0, -1, 1001, 1.5])
def test_reserve_many_refuses_a_bad_count_before_any_write(engine: Engine, count: float):
    engine.add()
    before = engine.snapshot()
    with pytest.raises(redis.ResponseError, match="bad count"):
        transitions.reserve_many(
            engine.client,
            engine.keys,
            lease_ms=5000,
            worker_id="w",
            count=count,  # type: ignore[arg-type]
        )
    assert engine.snapshot() == before


def test_a_resent_reserve_call_returns_the_same_jobs_and_reserves_no_more(engine: Engine):
    ids = [engine.add() for _ in range(5)]
    first = transitions.reserve_many(
        engine.client, engine.keys, lease_ms=5000, worker_id="w", count=2, request_id="req-1"
    ).jobs
    before = engine.snapshot()
    again = transitions.reserve_many(
        engine.client, engine.keys, lease_ms=5000, worker_id="w", count=2, request_id="req-1"
    ).jobs
    assert [job_id for job_id, _ in again] == [job_id for job_id, _ in first] == ids[:2]
    assert [f[b"token"] for _, f in again] == [b"1", b"1"]
    assert engine.snapshot() == before  # nothing more reserved, no token moved
    other = transitions.reserve_many(
        engine.client, engine.keys, lease_ms=5000, worker_id="w", count=2, request_id="req-2"
    ).jobs
    assert [job_id for job_id, _ in other] == ids[2:4]
    # The record expires with the lease.
    assert 0 < engine.client.pttl(engine.keys.reservation("req-1")) <= 5000
    engine.check_invariants()


def test_a_resent_reserve_leaves_out_jobs_no_longer_running_for_the_worker(engine: Engine):
    ids = [engine.add() for _ in range(2)]
    transitions.reserve_many(
        engine.client, engine.keys, lease_ms=5000, worker_id="w", count=2, request_id="req"
    )
    transitions.release(engine.client, engine.keys, ids[0], 1)
    again = transitions.reserve_many(
        engine.client, engine.keys, lease_ms=5000, worker_id="w", count=2, request_id="req"
    ).jobs
    assert [job_id for job_id, _ in again] == [ids[1]]
