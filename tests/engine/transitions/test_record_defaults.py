"""Job-hash fields left out at their defaults (``RECORD_DEFAULTS``, include/stored_default.lua):
the scripts that read 'max' and 'ttl' treat an absent field as its default."""

from __future__ import annotations

from django_rqueue.engine.fields import RECORD_DEFAULTS, JobFields
from tests.support.engine import Engine
from tests.support.waiting import wait_until

DEFAULT_MAX = RECORD_DEFAULTS[JobFields.MAX_ATTEMPTS]
DEFAULT_TTL = RECORD_DEFAULTS[JobFields.RESULT_TTL]


def test_fail_retries_a_job_without_max_until_the_default_attempts(engine: Engine):
    job_id = engine.add(max_attempts=None)
    assert JobFields.MAX_ATTEMPTS not in engine.job(job_id)
    outcomes = []
    for _attempt in range(DEFAULT_MAX):
        assert engine.reserve_id() == job_id
        outcome, _ = engine.fail(job_id, retry_ms=0)
        outcomes.append(outcome)
        if outcome == "retrying":
            wait_until(lambda: engine.promote()[0] == 1, message="retry promoted")
    assert outcomes == ["retrying"] * (DEFAULT_MAX - 1) + ["failed"]
    engine.check_invariants()


def test_reclaim_requeues_a_job_without_max_until_the_default_attempts(engine: Engine):
    job_id = engine.add(max_attempts=None)
    for attempt in range(1, DEFAULT_MAX + 1):
        assert engine.reserve(lease_ms=1) is not None
        expected = (1, 0) if attempt < DEFAULT_MAX else (0, 1)  # (requeued, failed)

        def reclaimed(expected: tuple[int, int] = expected) -> bool:
            return engine.reclaim()[:2] == expected

        wait_until(reclaimed, message=f"reclaim {attempt}")
    assert engine.state(job_id) == "failed"
    engine.check_invariants()


def test_an_expired_job_without_ttl_keeps_its_record_for_the_default_result_ttl(engine: Engine):
    job_id = engine.add(ttl=None, expires_at_ms=engine.now_ms() - 1)
    assert engine.reserve() is None  # ended as expired at reserve
    assert engine.job(job_id)[JobFields.CANCEL_REASON] == "expired"
    assert DEFAULT_TTL - 60 < engine.client.ttl(engine.keys.job(job_id)) <= DEFAULT_TTL
