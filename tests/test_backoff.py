"""Retry delays (django_rqueue.backoff) and how a failing job honours them in Redis."""

from __future__ import annotations

import random

import pytest
import redis

from django_rqueue import JobStatus, get_job, job
from django_rqueue.backoff import BASE, CAP, NAMED, exponential, odd_minutes, retry_delay
from django_rqueue.engine.keys import QueueKeys
from django_rqueue.worker.loop import Worker
from tests.support import transitions
from tests.support.waiting import wait_until

KEYS = QueueKeys.of("rqueue", "default")
seen_attempts: list[int] = []


pytestmark = pytest.mark.usefixtures("worker_may_close_db_connections")


def every_other_minute(attempt: int, exc: BaseException) -> float:
    """'Retry after 1, 3, 5, 7 minutes', as many notification services do."""
    seen_attempts.append(attempt)
    return 60.0 * (2 * attempt - 1)


@job(max_attempts=4, backoff=every_other_minute)
def always_fails() -> None:
    raise RuntimeError("nope")


@job(max_attempts=5, backoff=lambda attempt, exc: None if isinstance(exc, KeyError) else 0)
def gives_up_on_key_error() -> None:
    raise KeyError("fatal")


fast_calls: list[int] = []


@job(max_attempts=3, backoff=lambda attempt, exc: 0)
def fails_fast() -> None:
    fast_calls.append(1)
    raise ValueError(f"failure {len(fast_calls)}")


# -- the policies ---------------------------------------------------------------


@pytest.mark.parametrize("attempt", [1, 2, 3, 5, 12, 13, 40, 10_000])
def test_exponential_is_full_jitter_below_a_capped_ceiling(attempt: int):
    ceiling = CAP if attempt > 12 else min(CAP, BASE * 2 ** (attempt - 1))
    delays = [exponential(attempt, RuntimeError()) for _ in range(200)]
    assert all(0 <= d <= ceiling for d in delays)
    assert max(delays) > ceiling / 2  # spread over the range, not pinned at 0
    assert min(delays) < ceiling / 2


def test_exponential_jitter_differs_between_calls():
    random.seed(1)
    assert len({exponential(3, RuntimeError()) for _ in range(20)}) == 20


def test_the_documented_base_and_cap():
    assert (BASE, CAP) == (2.0, 3600.0)


def test_retry_delay_uses_the_named_policy():
    delay = retry_delay("exponential", 1, RuntimeError())
    assert delay is not None
    assert 0 <= delay <= BASE


def test_retry_delay_calls_a_callable_with_attempt_and_exception():
    exc = RuntimeError("x")
    calls = []

    def policy(attempt: int, exception: BaseException) -> int:
        calls.append((attempt, exception))
        return 7

    assert retry_delay(policy, 3, exc) == 7.0
    assert calls == [(3, exc)]


def test_a_callable_returning_none_stops_retrying():
    assert retry_delay(lambda a, e: None, 1, RuntimeError()) is None


@pytest.mark.parametrize("bad", [-1, "5", True, [1]])
def test_a_callable_returning_garbage_is_an_error(bad: object):
    with pytest.raises(ValueError, match="backoff returned"):
        retry_delay(lambda a, e: bad, 1, RuntimeError())  # type: ignore[arg-type,return-value]


def test_an_unknown_policy_name_is_an_error():
    with pytest.raises(ValueError, match="unknown backoff"):
        retry_delay("linear", 1, RuntimeError())


# -- honoured by a failing job ------------------------------------------------------


def _run_one() -> None:
    assert Worker(["default"], with_poller=False).work_once()


def _promote_now(client: redis.Redis, job_id: str) -> None:
    """Make a scheduled retry due at once (the test does not wait minutes)."""
    assert client.zadd(KEYS.delayed, {job_id: 0}, xx=True, ch=True) == 1
    wait_until(lambda: transitions.promote_due(client, KEYS, 10)[0] == 1, message="promoted")


def test_a_callable_backoff_schedules_each_retry_at_now_plus_its_delay(redis_client: redis.Redis):
    seen_attempts.clear()
    queued = always_fails.delay()
    for attempt in (1, 2, 3):
        _run_one()
        got = get_job(queued.id)
        assert got is not None
        assert got.status is JobStatus.SCHEDULED
        assert got.attempts == attempt
        assert got.run_at is not None
        assert got.finished_at is None
        delay = 60.0 * (2 * attempt - 1)
        seconds, micros = redis_client.time()
        now = seconds + micros / 1e6
        assert now + delay - 2 <= got.run_at.timestamp() <= now + delay
        assert redis_client.zscore(KEYS.delayed, queued.id) == pytest.approx(
            got.run_at.timestamp() * 1000, abs=1
        )
        _promote_now(redis_client, queued.id)
    _run_one()  # the 4th attempt is the last: max_attempts wins over the policy
    assert seen_attempts == [1, 2, 3]
    final = get_job(queued.id)
    assert final is not None
    assert final.status is JobStatus.FAILED
    assert final.attempts == 4
    assert len(final.errors) == 4
    assert redis_client.zscore(KEYS.failed, queued.id) is not None


def test_a_backoff_returning_none_fails_at_once(redis_client: redis.Redis):
    queued = gives_up_on_key_error.delay()
    _run_one()
    got = get_job(queued.id)
    assert got is not None
    assert got.status is JobStatus.FAILED
    assert got.attempts == 1
    assert got.error is not None
    assert got.error["type"] == "builtins.KeyError"
    assert redis_client.zcard(KEYS.delayed) == 0


def test_the_failed_store_keeps_every_attempts_error_oldest_first(redis_client: redis.Redis):
    fast_calls.clear()
    queued = fails_fast.delay()
    messages = []
    for attempt in (1, 2, 3):
        messages.append(f"failure {attempt}")
        _run_one()
        if attempt < 3:
            assert redis_client.hget(KEYS.job(queued.id), "s") == b"scheduled"
            _promote_now(redis_client, queued.id)
    got = get_job(queued.id)
    assert got is not None
    assert got.status is JobStatus.FAILED
    assert [e["message"] for e in got.errors] == messages
    assert got.error == got.errors[-1]
    for error in got.errors:
        assert error["type"] == "builtins.ValueError"
        assert "Traceback (most recent call last)" in error["traceback"]
        assert "in fails_fast" in error["traceback"]


def test_odd_minutes_is_1_3_5_7_minutes_without_jitter():
    delays = [retry_delay("odd_minutes", attempt, RuntimeError()) for attempt in range(1, 6)]
    assert delays == [60.0, 180.0, 300.0, 420.0, 540.0]
    assert odd_minutes(10, RuntimeError()) == 19 * 60.0


def test_an_unknown_name_is_an_error_naming_the_known_ones():
    with pytest.raises(ValueError, match="'exponential', 'odd_minutes'"):
        retry_delay("linear", 1, RuntimeError())


URL = "redis://localhost:6379/0"


def test_job_and_queue_options_accept_every_named_policy():
    from django_rqueue import job
    from django_rqueue.conf import problems

    for name in NAMED:
        job(backoff=name)
        assert problems({"REDIS_URL": URL, "QUEUES": {"default": {"backoff": name}}}) == []
    with pytest.raises(ValueError, match="exponential, odd_minutes or a callable"):
        job(backoff="linear")
    [error] = problems({"REDIS_URL": URL, "QUEUES": {"default": {"backoff": "linear"}}})
    assert error.id == "rqueue.E006" and "odd_minutes" in error.msg
