"""Unique keys in enqueue.lua: one pending job per key; released at a terminal state or TTL."""

from __future__ import annotations

import pytest

from tests.support.engine import Engine
from tests.support.waiting import wait_until


def _first_in(engine: Engine, state: str) -> str:
    if state == "scheduled":
        return engine.add(unique_key="k", delay_ms=60_000)
    job_id = engine.add(unique_key="k")
    if state == "running":
        assert engine.reserve_id() == job_id
    return job_id


@pytest.mark.parametrize("state", ["scheduled", "queued", "running"])
def test_a_duplicate_of_a_pending_job_returns_its_id_and_writes_nothing(engine: Engine, state: str):
    first = _first_in(engine, state)
    before = engine.snapshot()
    outcome, job_id, found = engine.enqueue(unique_key="k", group="elsewhere", priority=9)
    assert (outcome, job_id, found) == ("duplicate", first, state)
    assert engine.snapshot() == before


def test_the_unique_key_names_its_holder(engine: Engine):
    job_id = engine.add(unique_key="report:42")
    assert engine.client.get(engine.keys.unique("report:42")) == job_id.encode()
    assert engine.job(job_id)["uk"] == "report:42"
    assert engine.client.ttl(engine.keys.unique("report:42")) == -1


def test_different_keys_do_not_collide(engine: Engine):
    engine.add(unique_key="a")
    assert engine.enqueue(unique_key="b")[0] == "created"
    assert engine.enqueue()[0] == "created"


def _finish(engine: Engine, job_id: str, how: str) -> None:
    if how == "cancel":
        engine.cancel(job_id)
        return
    if how == "delete":
        engine.cancel(job_id, mode="delete")
        return
    assert engine.reserve_id() == job_id
    if how == "ack":
        engine.ack(job_id)
    else:
        engine.fail(job_id, retry_ms=-1)


@pytest.mark.parametrize("how", ["ack", "fail", "cancel", "delete"])
def test_the_key_is_accepted_again_once_the_first_job_is_finished(engine: Engine, how: str):
    first = engine.add(unique_key="k")
    _finish(engine, first, how)
    assert not engine.client.exists(engine.keys.unique("k"))
    outcome, second, state = engine.enqueue(unique_key="k")
    assert (outcome, state) == ("created", "queued")
    assert second != first
    assert engine.client.get(engine.keys.unique("k")) == second.encode()


def test_a_retry_does_not_release_the_key(engine: Engine):
    first = engine.add(unique_key="k", max_attempts=3)
    engine.reserve_id()
    assert engine.fail(first, retry_ms=60_000)[0] == "retrying"
    assert engine.enqueue(unique_key="k")[:2] == ("duplicate", first)


def test_a_stale_key_left_by_a_vanished_job_is_taken_over(engine: Engine):
    first = engine.add(unique_key="k")
    engine.client.delete(engine.keys.job(first))  # record expired or removed by hand
    outcome, second, _ = engine.enqueue(unique_key="k")
    assert outcome == "created"
    assert engine.client.get(engine.keys.unique("k")) == second.encode()


def test_finishing_an_old_holder_does_not_release_a_newer_holders_key(engine: Engine):
    old = engine.add(unique_key="k", unique_ttl=1)
    wait_until(lambda: not engine.client.exists(engine.keys.unique("k")), message="ttl")
    new = engine.add(unique_key="k")
    assert engine.reserve_id() == old
    engine.ack(old)
    assert engine.client.get(engine.keys.unique("k")) == new.encode()
    assert engine.enqueue(unique_key="k")[:2] == ("duplicate", new)


def test_unique_ttl_releases_the_key_while_the_job_is_still_pending(engine: Engine):
    first = engine.add(unique_key="k", unique_ttl=1)
    assert 0 < engine.client.ttl(engine.keys.unique("k")) <= 1
    assert engine.enqueue(unique_key="k")[:2] == ("duplicate", first)
    wait_until(
        lambda: engine.enqueue(unique_key="k")[0] == "created",
        timeout=5,
        message="unique key released by its TTL",
    )
    assert engine.state(first) == "queued"
    assert len(engine.drain()) == 2
