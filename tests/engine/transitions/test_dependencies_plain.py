"""A job without dependents (no ``nx``) pays nothing for dependencies: each terminal script
runs no more commands than before issue 26 (pinned counts, measured on ``main`` before the
change) and writes no key of dependencies or workflows."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from django_rqueue.engine.fields import JobFields
from django_rqueue.engine.keys import NEXT, OUTBOX, WAITING, new_job_id
from django_rqueue.execution import error_record
from tests.support import transitions
from tests.support.dependencies import add_nodes, edge, node
from tests.support.engine import Engine
from tests.support.jobs_in_state import retention
from tests.support.redis_commands import command_calls

_NOT_THE_SCRIPTS = {"evalsha", "config|resetstat", "info", "script|load", "script|exists"}


def _commands(engine: Engine, action: Callable[[], object]) -> dict[str, int]:
    server = engine.server()
    server.config_resetstat()
    action()
    calls = command_calls(server)
    return {name: n for name, n in calls.items() if name not in _NOT_THE_SCRIPTS}


def _running(engine: Engine, **options: object) -> tuple[str, int]:
    job_id = engine.add(**options)
    assert engine.reserve_id() == job_id
    return job_id, engine.token(job_id)


def _ack(engine: Engine, ttl: int) -> Callable[[], object]:
    job_id, token = _running(engine)
    return lambda: transitions.ack(engine.client, engine.keys, job_id, token, "7", ttl)


def _fail(engine: Engine, retry_ms: int) -> Callable[[], object]:
    job_id, token = _running(engine, max_attempts=2)
    err = error_record(RuntimeError("boom"))
    kept = retention(engine.queue)
    return lambda: transitions.fail(
        engine.client, engine.keys, job_id, token, err, retry_ms, retention=kept
    )


def _reclaim(engine: Engine, attempts: int) -> Callable[[], object]:
    job_id = engine.add(max_attempts=attempts)
    assert engine.reserve_id(lease_ms=1) == job_id
    engine.client.zadd(engine.keys.reserved, {job_id: 0})  # the lease ran out long ago
    return lambda: engine.reclaim()


def _cancel(engine: Engine, state: str, mode: str) -> Callable[[], object]:
    job_id = engine.add(delay_ms=60_000 if state == "scheduled" else 0)
    return lambda: engine.cancel(job_id, mode=mode)  # type: ignore[arg-type]


def _cancel_running(engine: Engine) -> Callable[[], object]:
    job_id, token = _running(engine)
    engine.cancel(job_id)
    return lambda: transitions.cancel_running(engine.client, engine.keys, job_id, token, ttl=600)


def _expire_at_reserve(engine: Engine) -> Callable[[], object]:
    engine.add(expires_at_ms=engine.now_ms() - 1000)
    return lambda: engine.reserve()


def _expire_at_promote(engine: Engine) -> Callable[[], object]:
    job_id = engine.add(delay_ms=60_000, expires_at_ms=engine.now_ms() - 1000)
    engine.client.zadd(engine.keys.delayed, {job_id: 0})
    return lambda: engine.promote()


def _empty(engine: Engine) -> Callable[[], object]:
    engine.add()
    return lambda: transitions.empty_queue(engine.client, engine.keys, 100)


#: transition -> (its setup, the commands its script ran on main before issue 26).
PINNED: dict[str, tuple[Callable[[Engine], Callable[[], object]], int]] = {
    "ack": (lambda e: _ack(e, 600), 13),
    "ack, result_ttl 0": (lambda e: _ack(e, 0), 11),
    "fail, retry": (lambda e: _fail(e, 1000), 17),
    "fail, final": (lambda e: _fail(e, -1), 21),
    "reclaim, requeue": (lambda e: _reclaim(e, 3), 20),
    "reclaim, final": (lambda e: _reclaim(e, 1), 21),
    "cancel queued": (lambda e: _cancel(e, "queued", "cancel"), 13),
    "cancel scheduled": (lambda e: _cancel(e, "scheduled", "cancel"), 7),
    "delete queued": (lambda e: _cancel(e, "queued", "delete"), 11),
    "cancel_running": (_cancel_running, 9),
    # One fewer than on main (20, 13): include/expire_if_due.lua reads the expiry and the
    # result TTL in one HMGET (with 'nx' and what the emission needs), not two HGETs; and
    # promote.lua reads two more per call, not per job (XLEN outbox, the first of waiting).
    "expiry at reserve": (_expire_at_reserve, 19),
    "expiry at promote": (_expire_at_promote, 12 + 2),
    "empty_queue": (_empty, 15),
}


@pytest.mark.parametrize("transition", list(PINNED))
def test_a_plain_job_runs_the_commands_it_ran_before(engine: Engine, transition: str):
    setup, pinned = PINNED[transition]
    action = setup(engine)
    ran = _commands(engine, action)
    assert sum(ran.values()) == pinned, ran


@pytest.mark.parametrize("transition", list(PINNED))
def test_a_plain_job_writes_no_key_of_dependencies(engine: Engine, transition: str):
    setup, _pinned = PINNED[transition]
    setup(engine)()
    found = set(engine.snapshot())
    base = engine.keys.base
    assert not [k for k in found if k.startswith((base + NEXT, base + WAITING, base + OUTBOX))]
    engine.check_invariants()


def test_an_input_acks_its_own_record_as_a_plain_job_does(engine: Engine):
    """Dependents change nothing of the input's own record and keys: the same fields (but
    ``nx``), the same keys written, only the dependent's side differs."""

    def acked(with_dependent: bool) -> tuple[set[str], set[str]]:
        engine.client.flushdb()
        job_id = new_job_id(engine.queue)
        gone = new_job_id(engine.queue)  # a dependent whose record is gone: nothing to settle
        nx = edge(gone, 1, "i") if with_dependent else ""
        add_nodes(engine, [node(engine, job_id=job_id, nx=nx)])
        assert engine.reserve_id() == job_id
        transitions.ack(engine.client, engine.keys, job_id, engine.token(job_id), "7", 600)
        fields = set(engine.job(job_id)) - {JobFields.DEPENDENTS}
        keys = {k.replace(job_id, "<id>") for k in engine.snapshot()}
        return fields, keys

    assert acked(with_dependent=True) == acked(with_dependent=False)
