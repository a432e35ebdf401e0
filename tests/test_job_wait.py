"""Job.wait / Job.await_: woken by the terminal transition through Redis (BLPOP), no polling."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from pytest_django import DjangoDbBlocker
from pytest_django.fixtures import Settings

from django_rqueue import Job, JobStateError, JobStatus, job
from django_rqueue.engine.connection import reset_clients
from django_rqueue.engine.fields import JobFields
from django_rqueue.engine.keys import QueueKeys
from django_rqueue.execution import error_record
from tests.support import transitions
from tests.support.inprocess import run_worker
from tests.support.jobs_in_state import retention

KEYS = QueueKeys.of("rqueue", "default")
#: A wait that is woken must end well before this (the BLPOP slice is 5 s).
WOKEN_WITHIN = 1.5


@pytest.fixture(autouse=True)
def _worker_may_check_db_connections(django_db_blocker: DjangoDbBlocker) -> Iterator[None]:
    with django_db_blocker.unblock():
        yield


@job(max_attempts=1, result_ttl=300)
def double(n: int) -> int:
    return 2 * n


@job(max_attempts=1)
def explode() -> None:
    raise RuntimeError("boom")


@job(max_attempts=1)
def nap(seconds: float) -> str:
    time.sleep(seconds)
    return "rested"


def _reserve(client: redis.Redis, lease_ms: int = 60_000) -> tuple[str, int]:
    got = transitions.reserve(client, KEYS, lease_ms=lease_ms, worker_id="tester")
    assert got is not None
    return got[0], int(got[1][b"token"])


def _later(action: Callable[[], Any], delay: float = 0.3) -> threading.Thread:
    """Run ``action`` in a thread after ``delay`` s (the test joins it)."""

    def run() -> None:
        time.sleep(delay)
        action()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _timed_wait(queued: Job[Any], timeout: float = 10.0) -> float:
    start = time.monotonic()
    assert queued.wait(timeout) is queued
    return time.monotonic() - start


def _calls(client: redis.Redis, command: str = "") -> int:
    """Commands (all, or ``command``) the server ran since ``CONFIG RESETSTAT``, those
    that scripts run included."""
    stats: dict[str, Any] = client.info("commandstats")
    if command:
        return int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))
    return sum(int(v["calls"]) for k, v in stats.items() if k != "cmdstat_info")


def _done_keys(client: redis.Redis) -> list[bytes]:
    return list(client.scan_iter(match=f"{KEYS.base}done:*"))


def test_a_finished_job_returns_at_once_refreshed():
    queued = double.delay(21)
    run_worker(burst=True)
    stale = Job.from_fields(queued.id, {"s": "queued"})
    start = time.monotonic()
    assert stale.wait(5) is stale
    assert time.monotonic() - start < 0.5
    assert (stale.status, stale.result, stale.name) == (JobStatus.SUCCEEDED, 42, queued.name)


def test_a_success_in_another_thread_wakes_the_waiter_without_polling(redis_client: redis.Redis):
    queued = double.delay(4)

    def ack() -> None:
        job_id, token = _reserve(redis_client)
        transitions.ack(redis_client, KEYS, job_id, token, result="8", result_ttl=300)

    redis_client.config_resetstat()
    begun = time.monotonic()  # before the thread's delay starts: the lower bound holds
    thread = _later(ack, delay=1.0)
    assert queued.wait(10) is queued
    elapsed = time.monotonic() - begun
    thread.join()
    assert 1.0 <= elapsed < 1.5
    assert (queued.status, queued.result) == (JobStatus.SUCCEEDED, 8)
    # One second of waiting: one BLPOP, two reads (before and after it; the reserve
    # script reads the job once more); every command run, the other thread's reserve
    # and ack scripts included, stays a few dozen.
    assert _calls(redis_client, "blpop") == 1
    assert _calls(redis_client, "hgetall") <= 3
    assert _calls(redis_client) < 60


def test_an_in_process_worker_in_a_thread_wakes_the_waiter():
    queued = nap.delay(0.2)
    thread = threading.Thread(target=lambda: run_worker(burst=True), daemon=True)
    thread.start()
    elapsed = _timed_wait(queued)
    thread.join(10)
    assert elapsed < WOKEN_WITHIN
    assert (queued.status, queued.result) == (JobStatus.SUCCEEDED, "rested")


def test_a_final_failure_wakes_the_waiter(redis_client: redis.Redis):
    queued = explode.delay()

    def fail() -> None:
        job_id, token = _reserve(redis_client)
        error = error_record(RuntimeError("boom"))
        assert transitions.fail(redis_client, KEYS, job_id, token, error, -1, retention=retention())

    thread = _later(fail)
    elapsed = _timed_wait(queued)
    thread.join()
    assert elapsed < WOKEN_WITHIN
    assert queued.status is JobStatus.FAILED
    assert queued.error is not None and queued.error["message"] == "boom"


def test_a_lease_expiry_on_the_last_attempt_wakes_the_waiter(redis_client: redis.Redis):
    queued = explode.delay()
    _reserve(redis_client, lease_ms=1)
    thread = _later(
        lambda: transitions.reclaim_expired(redis_client, KEYS, 10, "{}", retention=retention())
    )
    elapsed = _timed_wait(queued)
    thread.join()
    assert elapsed < WOKEN_WITHIN
    assert queued.status is JobStatus.FAILED


def test_a_cancel_wakes_the_waiter():
    queued = double.using(delay=3600).delay(1)
    canceller = Job.from_fields(queued.id, {"s": "scheduled", "n": queued.name})
    thread = _later(canceller.cancel)
    elapsed = _timed_wait(queued)
    thread.join()
    assert elapsed < WOKEN_WITHIN
    assert queued.status is JobStatus.CANCELLED


def test_a_delete_wakes_the_waiter_with_job_state_error():
    queued = double.using(delay=3600).delay(1)
    deleter = Job.from_fields(queued.id, {"s": "scheduled", "n": queued.name})
    thread = _later(deleter.delete)
    start = time.monotonic()
    with pytest.raises(JobStateError, match="no longer exists"):
        queued.wait(10)
    thread.join()
    assert time.monotonic() - start < WOKEN_WITHIN


def test_a_gone_job_raises_job_state_error_and_leaves_no_key(redis_client: redis.Redis):
    gone = Job.from_fields("default:" + "0" * 22, {"s": "queued"})
    with pytest.raises(JobStateError):
        gone.wait(1)
    assert redis_client.dbsize() == 0


def test_every_waiter_of_a_job_wakes(redis_client: redis.Redis):
    queued = double.delay(3)
    copies = [Job.from_fields(queued.id, {"s": "queued"}) for _ in range(3)]
    times: list[float] = []

    def waiter(copy: Job[Any]) -> None:
        times.append(_timed_wait(copy))

    threads = [threading.Thread(target=waiter, args=(c,), daemon=True) for c in copies]
    for t in threads:
        t.start()
    time.sleep(0.3)
    job_id, token = _reserve(redis_client)
    transitions.ack(redis_client, KEYS, job_id, token, result="6", result_ttl=300)
    for t in threads:
        t.join(10)
    assert len(times) == 3 and max(times) < WOKEN_WITHIN
    assert {c.status for c in copies} == {JobStatus.SUCCEEDED}


def test_the_timeout_raises_timeout_error():
    queued = double.delay(1)
    start = time.monotonic()
    with pytest.raises(TimeoutError, match="still queued"):
        queued.wait(0.3)
    assert 0.3 <= time.monotonic() - start < 0.8
    with pytest.raises(TimeoutError):
        queued.wait(0)


def test_a_stale_token_does_not_end_the_wait(redis_client: redis.Redis):
    queued = double.delay(1)
    redis_client.rpush(KEYS.done(queued.id), "1", "1")
    start = time.monotonic()
    with pytest.raises(TimeoutError):
        queued.wait(0.3)
    assert time.monotonic() - start >= 0.3


@pytest.mark.parametrize("timeout", [-1, -0.001, float("nan"), "1", None, True])
def test_a_bad_timeout_is_a_value_error(timeout: Any, redis_client: redis.Redis):
    queued = double.delay(1)
    with pytest.raises(ValueError, match="timeout"):
        queued.wait(timeout)
    with pytest.raises(ValueError, match="timeout"):
        asyncio.run(queued.await_(timeout))
    assert redis_client.hget(KEYS.job(queued.id), JobFields.AWAITED) is None


def test_await_is_woken_the_same_way_without_blocking_the_loop(redis_client: redis.Redis):
    queued = double.delay(5)

    def ack() -> None:
        job_id, token = _reserve(redis_client)
        transitions.ack(redis_client, KEYS, job_id, token, result="10", result_ttl=300)

    async def main() -> tuple[float, int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        tick = asyncio.create_task(ticker())
        assert await queued.await_(10) is queued
        tick.cancel()
        return time.monotonic(), ticks

    # Timed from before the thread's delay starts (not from inside the loop, which
    # starts later): the ack cannot come sooner than 0.5 s after this.
    begun = time.monotonic()
    thread = _later(ack, delay=0.5)
    woken, ticks = asyncio.run(main())
    elapsed = woken - begun
    thread.join()
    assert 0.5 <= elapsed < WOKEN_WITHIN
    assert ticks >= 20  # the loop ran on while the wait blocked
    assert (queued.status, queued.result) == (JobStatus.SUCCEEDED, 10)


def test_await_times_out_and_returns_a_finished_job_at_once():
    queued = double.delay(1)
    start = time.monotonic()
    with pytest.raises(TimeoutError):
        asyncio.run(queued.await_(0.3))
    assert 0.3 <= time.monotonic() - start < 0.8
    run_worker(burst=True)
    assert asyncio.run(queued.await_(5)).status is JobStatus.SUCCEEDED


def test_await_with_a_cache_alias_runs_the_wait_in_a_thread(
    settings: Settings, redis_client: redis.Redis
):
    url = settings.RQUEUE["REDIS_URL"]
    settings.CACHES = {
        **settings.CACHES,
        "jobs": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": url},
    }
    settings.RQUEUE = {"CACHE_ALIAS": "jobs", "QUEUES": {"default": {}}}
    queued = double.delay(6)

    def ack() -> None:
        job_id, token = _reserve(redis_client)
        transitions.ack(redis_client, KEYS, job_id, token, result="12", result_ttl=300)

    thread = _later(ack)
    start = time.monotonic()
    try:
        assert asyncio.run(queued.await_(10)).result == 12
    finally:
        reset_clients()  # no cached client of the "jobs" cache outlives this test
    thread.join()
    assert time.monotonic() - start < WOKEN_WITHIN


def test_jobs_nobody_waits_for_leave_no_wake_up_list(redis_client: redis.Redis):
    succeeded, failed, cancelled = double.delay(1), explode.delay(), double.using(delay=60).delay(2)
    deleted = double.using(delay=60).delay(3)
    run_worker(burst=True)
    cancelled.cancel()
    deleted.delete()
    for j in (succeeded, failed, cancelled):
        j.refresh()
        assert redis_client.hget(KEYS.job(j.id), JobFields.AWAITED) is None
    assert (succeeded.status, failed.status) == (JobStatus.SUCCEEDED, JobStatus.FAILED)
    assert _done_keys(redis_client) == []


def test_the_wake_up_list_of_an_awaited_job_expires(redis_client: redis.Redis):
    queued = double.delay(1)
    with pytest.raises(TimeoutError):
        queued.wait(0.05)  # marks it as awaited; nobody waits any more
    run_worker(burst=True)
    assert _done_keys(redis_client) == [KEYS.done(queued.id).encode()]
    assert 0 < redis_client.ttl(KEYS.done(queued.id)) <= 60
