"""include/wake_waiters.lua: every terminal transition of an awaited job pushes one token to
``<base>done:<id>`` (expiring); a job nobody awaits gets no list."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from django_rqueue.engine.fields import JobFields
from tests.support import transitions
from tests.support.engine import Engine


def _ack(engine: Engine, job_id: str) -> None:
    engine.ack(engine.reserve_id())


def _ack_reserve(engine: Engine, job_id: str) -> None:
    job_id = engine.reserve_id()
    stale, _ = transitions.ack_and_reserve(
        engine.client,
        engine.keys,
        job_id,
        engine.token(job_id),
        "null",
        600,
        lease_ms=30_000,
        worker_id="w1",
    )
    assert stale is None


def _fail(engine: Engine, job_id: str) -> None:
    assert engine.fail(engine.reserve_id())[0] == "failed"


def _reclaim(engine: Engine, job_id: str) -> None:
    engine.reserve_id(lease_ms=1)
    time.sleep(0.01)  # let the lease of 1 ms run out
    assert engine.reclaim()[1] == 1


def _cancel(engine: Engine, job_id: str) -> None:
    engine.cancel(job_id)


def _delete(engine: Engine, job_id: str) -> None:
    engine.cancel(job_id, mode="delete")


def _delete_failed(engine: Engine, job_id: str) -> None:
    _fail(engine, job_id)
    engine.client.delete(engine.keys.done(job_id))  # the failure's own token
    upto = engine.now_ms() + 1000
    done = transitions.failed_batch(
        engine.client, engine.keys, mode="delete", limit=10, offset=0, upto_ms=upto
    )
    assert done[0] == 1


TERMINAL: dict[str, Callable[[Engine, str], None]] = {
    "ack": _ack,
    "ack_reserve": _ack_reserve,
    "fail": _fail,
    "reclaim": _reclaim,
    "cancel": _cancel,
    "delete": _delete,
    "failed_batch delete": _delete_failed,
}


@pytest.mark.parametrize("name", TERMINAL)
def test_an_awaited_job_gets_one_expiring_token(engine: Engine, name: str):
    job_id = engine.add(max_attempts=1)
    engine.client.hset(engine.keys.job(job_id), JobFields.AWAITED, 1)
    TERMINAL[name](engine, job_id)
    done = engine.keys.done(job_id)
    assert engine.client.lrange(done, 0, -1) == [b"1"]
    assert 0 < engine.client.ttl(done) <= 60
    engine.check_invariants()


@pytest.mark.parametrize("name", TERMINAL)
def test_a_job_nobody_awaits_gets_no_list(engine: Engine, name: str):
    job_id = engine.add(max_attempts=1)
    before = set(engine.client.keys("*"))
    TERMINAL[name](engine, job_id)
    assert not engine.client.exists(engine.keys.done(job_id))
    new = {k for k in set(engine.client.keys("*")) - before if b"done:" in k}
    assert new == set()
    engine.check_invariants()


def test_a_retry_is_not_terminal(engine: Engine):
    job_id = engine.add(max_attempts=2)
    engine.client.hset(engine.keys.job(job_id), JobFields.AWAITED, 1)
    assert engine.fail(engine.reserve_id(), retry_ms=0)[0] == "retrying"
    assert not engine.client.exists(engine.keys.done(job_id))
