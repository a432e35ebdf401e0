"""The periodic-entry scripts: schedule_sync, schedule_due, schedule_claim, schedule_run_now."""

from __future__ import annotations

import pytest
import redis

from django_rqueue.engine import calls
from django_rqueue.engine.replies import ClaimOutcome, EnqueueOutcome
from tests.support import transitions
from tests.support.engine import Engine

FIELDS: dict[str, str | int] = {"n": "tests.noop", "p": "[]", "max": 3, "tmo": 300_000, "ttl": 600}


def _claim(
    engine: Engine,
    entry: str,
    tick: int,
    next_tick: int,
    job_id: str,
    *,
    priority: int = 0,
    group: str = "",
    unique_key: str = "",
    unique_ttl: int = 0,
):
    job = calls.NewJob(job_id, priority, group, unique_key, unique_ttl, FIELDS)
    return transitions.schedule_claim(
        engine.client, engine.keys, job, entry=entry, tick_ms=tick, next_tick_ms=next_tick
    )


def _state(engine: Engine, entry: str) -> dict[str, str]:
    return engine.job_like(engine.keys.schedule_entry(entry))


def test_sync_stores_new_entries_with_their_first_tick(engine: Engine):
    got = transitions.schedule_sync(
        engine.client, engine.keys, [("a", "every:1", 5_000), ("b", "every:2", 6_000)]
    )
    assert got == (2, 0)
    assert engine.zset(engine.keys.schedule) == {"a": 5_000, "b": 6_000}
    assert _state(engine, "a") == {"spec": "every:1"}


def test_sync_keeps_the_next_tick_last_run_and_pause_of_an_unchanged_entry(engine: Engine):
    transitions.schedule_sync(engine.client, engine.keys, [("a", "every:1", 5_000)])
    engine.client.hset(engine.keys.schedule_entry("a"), mapping={"paused": "1", "last": "4000"})
    assert transitions.schedule_sync(engine.client, engine.keys, [("a", "every:1", 9_000)]) == (
        0,
        0,
    )
    assert engine.zset(engine.keys.schedule) == {"a": 5_000}
    assert _state(engine, "a") == {"spec": "every:1", "paused": "1", "last": "4000"}


def test_sync_resets_the_next_tick_when_the_definition_changed(engine: Engine):
    transitions.schedule_sync(engine.client, engine.keys, [("a", "every:1", 5_000)])
    assert transitions.schedule_sync(engine.client, engine.keys, [("a", "every:60", 60_000)]) == (
        1,
        0,
    )
    assert engine.zset(engine.keys.schedule) == {"a": 60_000}
    assert _state(engine, "a")["spec"] == "every:60"


def test_sync_removes_entries_no_longer_listed_with_their_state(engine: Engine):
    transitions.schedule_sync(
        engine.client, engine.keys, [("a", "every:1", 5_000), ("gone", "every:1", 5_000)]
    )
    assert transitions.schedule_sync(engine.client, engine.keys, [("a", "every:1", 5_000)]) == (
        0,
        1,
    )
    assert engine.zset(engine.keys.schedule) == {"a": 5_000}
    assert not engine.client.exists(engine.keys.schedule_entry("gone"))


def test_due_returns_only_entries_whose_tick_has_come(engine: Engine):
    now = engine.now_ms()
    transitions.schedule_sync(
        engine.client,
        engine.keys,
        [
            ("late", "every:1", now - 5_000),
            ("due", "every:1", now - 1),
            ("later", "every:1", now + 60_000),
        ],
    )
    read = transitions.schedule_due(engine.client, engine.keys, 10)
    assert read.due == [("late", now - 5_000), ("due", now - 1)]
    assert read.now_ms >= now
    assert read.next_ms == now + 60_000


def test_due_with_a_full_batch_says_more_may_be_due(engine: Engine):
    now = engine.now_ms()
    transitions.schedule_sync(
        engine.client, engine.keys, [(f"e{i}", "every:1", now - 1_000 + i) for i in range(3)]
    )
    read = transitions.schedule_due(engine.client, engine.keys, 2)
    assert [name for name, _ in read.due] == ["e0", "e1"]
    assert read.next_ms == 0


def test_due_on_an_empty_schedule(engine: Engine):
    read = transitions.schedule_due(engine.client, engine.keys, 10)
    assert (read.due, read.next_ms) == ([], -1)


def test_a_claim_moves_the_tick_on_and_queues_the_job_with_the_tick_as_run_at(engine: Engine):
    now = engine.now_ms()
    tick = now - 3_000
    transitions.schedule_sync(engine.client, engine.keys, [("a", "every:1", tick)])
    reply = _claim(engine, "a", tick, now + 1_000, "default:job-a-1", priority=5, group="g")
    assert reply == (EnqueueOutcome.CREATED, "default:job-a-1", "queued")
    assert engine.zset(engine.keys.schedule) == {"a": now + 1_000}
    job = engine.job("default:job-a-1")
    assert (job["s"], job["due"], job["prio"], job["group"], job["n"]) == (
        "queued",
        str(tick),
        "5",
        "g",
        "tests.noop",
    )
    assert int(job["at"]) >= now
    assert _state(engine, "a") == {"spec": "every:1", "last": str(tick), "job": "default:job-a-1"}
    engine.check_invariants()


def test_of_two_claims_of_one_tick_exactly_one_enqueues(engine: Engine):
    now = engine.now_ms()
    transitions.schedule_sync(engine.client, engine.keys, [("a", "every:1", now - 10)])
    first = _claim(engine, "a", now - 10, now + 990, "default:first")
    second = _claim(engine, "a", now - 10, now + 990, "default:second")
    assert first[0] is EnqueueOutcome.CREATED
    assert second is ClaimOutcome.TAKEN
    assert engine.state("default:second") is None
    assert engine.stats()["queued"] == 1
    engine.check_invariants()


def test_a_claim_of_a_removed_entry_is_taken(engine: Engine):
    assert _claim(engine, "nobody", 1_000, 2_000, "default:x") is ClaimOutcome.TAKEN
    assert engine.state("default:x") is None


def test_a_paused_entry_passes_its_tick_over_without_a_job(engine: Engine):
    now = engine.now_ms()
    transitions.schedule_sync(engine.client, engine.keys, [("a", "every:1", now - 10)])
    engine.client.hset(engine.keys.schedule_entry("a"), "paused", "1")
    assert _claim(engine, "a", now - 10, now + 990, "default:p") is ClaimOutcome.PAUSED
    assert engine.state("default:p") is None
    assert engine.zset(engine.keys.schedule) == {"a": now + 990}
    assert "last" not in _state(engine, "a")


def test_an_entry_without_a_next_tick_leaves_the_schedule(engine: Engine):
    now = engine.now_ms()
    transitions.schedule_sync(engine.client, engine.keys, [("a", "cron:x", now - 10)])
    assert _claim(engine, "a", now - 10, -1, "default:last")[0] is EnqueueOutcome.CREATED
    assert engine.zset(engine.keys.schedule) == {}


def test_a_claim_respects_the_jobs_unique_key(engine: Engine):
    now = engine.now_ms()
    holder = engine.add(unique_key="digest")
    transitions.schedule_sync(engine.client, engine.keys, [("a", "every:1", now - 10)])
    reply = _claim(engine, "a", now - 10, now + 990, "default:dup", unique_key="digest")
    assert reply == (EnqueueOutcome.DUPLICATE, holder, "queued")
    assert _state(engine, "a")["job"] == holder
    assert engine.zset(engine.keys.schedule) == {"a": now + 990}


@pytest.mark.parametrize(
    ("tick", "next_tick", "priority"),
    [(1_000, 1_000, 0), (1_000, 500, 0), (1_000, 2_000, 101), (1_000, 2_000, 1.5)],
)
def test_bad_claim_arguments_are_refused_before_any_write(
    engine: Engine, tick: int, next_tick: int, priority: float
):
    transitions.schedule_sync(engine.client, engine.keys, [("a", "every:1", tick)])
    before = engine.snapshot()
    with pytest.raises(redis.ResponseError):
        _claim(engine, "a", tick, next_tick, "default:bad", priority=priority)  # type: ignore[arg-type]
    assert engine.snapshot() == before


def test_run_now_enqueues_at_once_and_records_the_run_even_while_paused(engine: Engine):
    now = engine.now_ms()
    transitions.schedule_sync(engine.client, engine.keys, [("a", "every:60", now + 60_000)])
    engine.client.hset(engine.keys.schedule_entry("a"), "paused", "1")
    job = calls.NewJob("default:now", 0, "", "", 0, FIELDS)
    reply = transitions.schedule_run_now(engine.client, engine.keys, job, entry="a")
    assert reply == (EnqueueOutcome.CREATED, "default:now", "queued")
    state = _state(engine, "a")
    assert state["job"] == "default:now"
    assert int(state["last"]) >= now
    assert state["paused"] == "1"
    assert engine.zset(engine.keys.schedule) == {"a": now + 60_000}  # ticks unchanged
    engine.check_invariants()
