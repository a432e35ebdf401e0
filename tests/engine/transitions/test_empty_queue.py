"""empty_queue.lua: "empty this queue" deletes the queued jobs, in bounded chunks, and
nothing else."""

from __future__ import annotations

from tests.support import transitions
from tests.support.engine import Engine


def test_emptying_deletes_every_queued_job_in_bounded_chunks_and_nothing_else(engine: Engine):
    queued = [
        engine.add(priority=p, group=g) for p in (0, 5) for g in ("", "a", "b") for _ in range(3)
    ]
    held = engine.add(group="capped", priority=7)
    engine.add(group="capped", priority=7)  # parked: its group runs at its cap of 1
    parked = engine.add(group="capped", priority=2)
    assert engine.reserve_id(cap=1) == held
    assert engine.parked("capped") == {7}
    unique = engine.add(unique_key="order:1", unique_ttl=600)
    scheduled = engine.add(delay_ms=3_600_000)
    running = engine.add(priority=100)
    assert engine.reserve_id() == running
    failed = engine.add(priority=100, max_attempts=1)
    assert engine.reserve_id() == failed
    assert engine.fail(failed) == ("failed", None)
    total = len(queued) + 3  # + the capped group's two queued jobs and the unique one
    assert engine.stats()["queued"] == total

    calls = 0
    while True:
        deleted, stale, more = transitions.empty_queue(engine.client, engine.keys, 4)
        calls += 1
        assert deleted <= 4 and stale == 0
        engine.check_invariants()
        if not more:
            break
    assert calls == -(-total // 4) or calls == -(-total // 4) + 1
    assert engine.stats()["queued"] == 0
    assert engine.zset(engine.keys.prios) == {}
    assert engine.parked("capped") == set()
    for job_id in (*queued, parked, unique):
        assert engine.state(job_id) is None
    assert not engine.client.exists(engine.keys.unique("order:1"))  # released
    assert [engine.state(j) for j in (scheduled, running, held, failed)] == [
        "scheduled",
        "running",
        "running",
        "failed",
    ]
    # The queue works as before: a new job is queued and reserved.
    new = engine.add(group="a")
    assert engine.reserve_id() == new
    engine.check_invariants()


def test_emptying_drops_ids_whose_record_is_gone(engine: Engine):
    ids = [engine.add() for _ in range(3)]
    engine.client.delete(engine.keys.job(ids[1]))
    assert transitions.empty_queue(engine.client, engine.keys, 10) == (2, 1, False)
    assert engine.stats()["queued"] == 0
    engine.check_invariants()


def test_emptying_an_empty_queue_changes_nothing(engine: Engine):
    before = engine.snapshot()
    assert transitions.empty_queue(engine.client, engine.keys, 10) == (0, 0, False)
    assert engine.snapshot() == before
