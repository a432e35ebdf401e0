"""Workers and rate-limited queues (django_rqueue.worker.rate_limits), in-process.

The worker runs in the test process against the real test redis-server; the
rate is checked on the jobs' ``started_at`` (set on the Redis clock when a
job is reserved), never on the test's clock.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest
import redis
from pytest_django.fixtures import Settings as SettingsFixture

from django_rqueue import Job, JobStatus, get_job
from django_rqueue.conf import RateLimit
from django_rqueue.worker.loop import Worker
from django_rqueue.worker.rate_limits import NextSlots
from django_rqueue.worker.reserving import IDLE_BLOCK
from tests.jobs_app.jobs import async_record, record
from tests.support.inprocess import keys, run_to_end
from tests.support.redis_commands import command_calls
from tests.support.waiting import wait_until

pytestmark = pytest.mark.usefixtures("worker_may_close_db_connections")

METERED = "metered"


def limit_queue(settings: SettingsFixture, rate: str) -> RateLimit:
    """Declare the queue :data:`METERED` with ``rate_limit`` ``rate``."""
    queues = {**settings.RQUEUE["QUEUES"], METERED: {"rate_limit": rate}}
    settings.RQUEUE = {**settings.RQUEUE, "QUEUES": queues}
    return RateLimit.parse(rate)


def started_ms(jobs: Sequence[Job[Any]]) -> list[int]:
    """The reservation times (ms, Redis clock) of those of ``jobs`` that started, sorted."""
    times = []
    for enqueued in jobs:
        done = get_job(enqueued.id)
        assert done is not None, enqueued.id
        if done.started_at is not None:
            times.append(round(done.started_at.timestamp() * 1000))
    return sorted(times)


def succeeded(jobs: Sequence[Job[Any]]) -> int:
    """How many of ``jobs`` succeeded."""
    return sum(1 for j in jobs if (done := get_job(j.id)) and done.status is JobStatus.SUCCEEDED)


def assert_no_faster_than(times: list[int], limit: RateLimit) -> None:
    """GCRA's promise: the k-th job after the first went no sooner than k intervals
    less the tolerance (and the 1 ms the job records round to) after it."""
    first = times[0]
    for k, at in enumerate(times):
        assert at - first >= k * limit.interval_ms - limit.tolerance_ms - 1, (k, times)


def test_next_slots_remembers_a_wait_until_it_passes():
    now = [100.0]
    slots = NextSlots(clock=lambda: now[0])
    assert slots.seconds_to_next() is None
    slots.note("a", 1500)
    slots.note("b", 0)  # not held back: nothing to remember
    assert slots.limited("a") and not slots.limited("b")
    assert slots.seconds_to_next() == pytest.approx(1.5)
    now[0] += 1.0
    assert slots.limited("a") and slots.seconds_to_next() == pytest.approx(0.5)
    now[0] += 0.5
    assert not slots.limited("a")
    assert slots.seconds_to_next() is None
    slots.note("a", 200)
    slots.note("a", 0)  # a later call got all it asked for
    assert not slots.limited("a")


def test_an_idle_worker_blocks_neither_on_a_limited_queue_nor_past_its_next_slot(
    settings: SettingsFixture,
):
    limit_queue(settings, "1/m")
    worker = Worker([METERED, "default"], with_poller=False)
    wait = worker.reserver.idle_wait()
    assert wait.notify == [keys(METERED).notify, keys().notify]
    assert wait.seconds == IDLE_BLOCK
    worker.reserver.next_slots.note(METERED, 1500)
    wait = worker.reserver.idle_wait()
    assert wait.notify == [keys().notify]  # a token there must not wake it
    assert 0 < wait.seconds <= 1.5
    alone = Worker([METERED], with_poller=False)
    alone.reserver.next_slots.note(METERED, 1500)
    wait = alone.reserver.idle_wait()
    assert wait.notify == []  # nothing to block on: it sleeps until the slot
    assert 0 < wait.seconds <= 1.5


class QuietHooks:
    """A supervisor's hooks that do nothing: with them a worker reserves in batches."""

    def prefetched(self, queue: str, jobs: Sequence[Job[Any]]) -> None:
        pass

    def started(self, queue: str, job: Job[Any]) -> None:
        pass

    def finished(self, job: Job[Any], outcome: str) -> None:
        pass

    def flush(self) -> None:
        pass


@pytest.mark.parametrize("mode", ["one by one", "batches", "async"])
def test_a_worker_takes_a_limited_queues_jobs_no_faster_than_its_rate(
    ledger: str, settings: SettingsFixture, mode: str
) -> None:
    limit = limit_queue(settings, "10/s")  # 100 ms apart, one at a time
    job = async_record if mode == "async" else record
    jobs = [job.using(queue=METERED).delay(ledger, str(n)) for n in range(6)]
    worker = Worker(
        [METERED],
        burst=True,
        with_poller=False,
        hooks=QuietHooks() if mode == "batches" else None,
        async_concurrency=4,
    )
    if mode == "batches":  # as after short jobs: it asks for up to 20 at a time
        worker.reserver.quiet[METERED], worker.reserver.run_times[METERED] = True, 0.001

    run_to_end(worker)

    assert worker.processed == succeeded(jobs) == 6
    assert_no_faster_than(started_ms(jobs), limit)


@contextmanager
def worker_thread(queues: Sequence[str]) -> Iterator[Worker]:
    """A :class:`Worker` on ``queues`` in a thread, stopped and joined on exit."""
    worker = Worker(list(queues), with_poller=False)
    thread = threading.Thread(target=worker.run, name="test-worker", daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.request_stop()
        thread.join(15)
        assert not thread.is_alive(), "worker thread did not stop"


def test_other_queues_keep_flowing_and_the_limited_one_is_not_polled_in_a_loop(
    ledger: str, settings: SettingsFixture, rqueue_redis: redis.Redis
) -> None:
    limit = limit_queue(settings, "4/s")  # 250 ms apart
    metered = [record.using(queue=METERED).delay(ledger, f"m{n}") for n in range(40)]
    others = [record.delay(ledger, f"d{n}") for n in range(30)]

    with worker_thread([METERED, "default"]) as worker:  # the limited queue comes first
        # The other queue's 30 jobs do not wait behind the limited queue's slots.
        wait_until(lambda: succeeded(others) == 30, timeout=5, message="default is held up")
        assert succeeded(metered) <= 6  # about a second's worth, at 4/s
        # Now idle but for the limited queue: count what reaches Redis while it hands
        # out a few more jobs (a worker polling it in a loop would send thousands).
        before, done = command_calls(rqueue_redis), succeeded(metered)
        wait_until(lambda: succeeded(metered) >= done + 4, timeout=10, message="metered stalled")
        after = command_calls(rqueue_redis)
        assert worker.reserver.next_slots.seconds_to_next() is not None or succeeded(metered) == 40

    sent = {name: after.get(name, 0) - before.get(name, 0) for name in ("evalsha", "blpop")}
    jobs_meanwhile = succeeded(metered) - done
    print(f"{sent} for {jobs_meanwhile} jobs of the limited queue")
    # Per slot: a reserve or ack_reserve, maybe a plain ack, one BLPOP that ends at the slot.
    assert sum(sent.values()) <= 6 * (jobs_meanwhile + 2), sent
    assert_no_faster_than(started_ms(metered), limit)
