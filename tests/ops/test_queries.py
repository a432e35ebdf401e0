"""Read-only views of the queues (django_rqueue.ops: counts, listings, alerts) on a redis-server.

Jobs are put in their states through the real transitions (the ``jobs``
fixture); where an order depends on times, consecutive jobs get distinct
Redis milliseconds (:func:`tick`).
"""

from __future__ import annotations

import datetime
import itertools

import pytest
import redis

from django_rqueue import JobStatus, get_job
from django_rqueue.engine.connection import redis_time_ms
from django_rqueue.execution import error_record
from django_rqueue.master.heartbeat import publish
from django_rqueue.ops import listings
from django_rqueue.ops.alerts import QueueWarning, WarningKind, queue_warnings, worker_warnings
from django_rqueue.ops.counts import QueueCounts, queue_counts, throughput
from django_rqueue.ops.listings import (
    FilteredPage,
    GroupRow,
    JobSource,
    Row,
    filtered_page,
    group_count,
    groups,
    priorities,
)
from django_rqueue.ops.workers import WorkerInfo, list_workers
from tests.support import transitions
from tests.support.jobs_in_state import Jobs, retention
from tests.support.waiting import wait_until


def tick(client: redis.Redis) -> None:
    """Until Redis's clock has moved on by at least one millisecond."""
    now = redis_time_ms(client)
    wait_until(lambda: redis_time_ms(client) > now, timeout=1, interval=0.001)


def ids(rows: list[Row]) -> list[str]:
    return [row.id for row in rows]


# -- counts ----------------------------------------------------------------------


def test_queue_counts_count_every_state(jobs: Jobs) -> None:
    oldest = jobs.queued()
    jobs.queued(group="g")
    scheduled = jobs.scheduled()
    jobs.running()
    for _ in range(3):
        jobs.failed()
    jobs.succeeded()
    jobs.failed(queue="emails")  # another queue's

    counts = queue_counts("default")

    oldest_job, scheduled_job = get_job(oldest), get_job(scheduled)
    assert oldest_job is not None and scheduled_job is not None
    assert counts == QueueCounts(
        "default",
        queued=2,
        scheduled=1,
        running=1,
        failed=3,
        succeeded_total=1,
        failed_total=3,
        enqueued_total=8,
        oldest_queued_at=oldest_job.enqueued_at,
        next_scheduled_at=scheduled_job.run_at,
    )


def test_queue_counts_read_the_retried_and_reclaimed_totals(jobs: Jobs) -> None:
    keys, kept = jobs.keys(), retention()
    retried = jobs.running(max_attempts=2)
    error = error_record(ValueError("boom"))
    assert transitions.fail(jobs.client, keys, retried, 1, error, 60_000, retention=kept)[0] == (
        "retrying"
    )
    lost = jobs.queued(max_attempts=2)
    assert transitions.reserve(jobs.client, keys, lease_ms=1, worker_id="w1") is not None
    wait_until(
        lambda: transitions.reclaim_expired(jobs.client, keys, 10, error, retention=kept)[0],
        message="lease reclaimed",
    )

    counts = queue_counts("default")

    assert jobs.state(lost) == "queued"
    assert (counts.enqueued_total, counts.retried_total, counts.reclaimed_total) == (2, 1, 1)
    assert (counts.succeeded_total, counts.failed_total) == (0, 0)


def test_an_empty_queue_counts_nothing(rqueue_redis: redis.Redis) -> None:
    assert queue_counts("low") == QueueCounts("low")


def test_throughput_has_sixty_minutes_with_this_minutes_outcomes(jobs: Jobs) -> None:
    jobs.succeeded()
    jobs.succeeded()
    jobs.failed()

    rows = throughput("default")

    assert len(rows) == 60
    minutes = [minute for minute, _, _ in rows]
    assert all(b - a == datetime.timedelta(minutes=1) for a, b in itertools.pairwise(minutes))
    # Summed, so that a minute turning over between the writes and the read is no matter.
    assert sum(s for _, s, _ in rows) == 2
    assert sum(f for _, _, f in rows) == 1


def test_priorities_and_groups_in_serving_order(jobs: Jobs) -> None:
    first = jobs.queued(priority=5, group="g1")
    jobs.queued(priority=5, group="g1")
    only = jobs.queued(priority=5, group="g2")
    jobs.queued()

    assert priorities("default") == [5, 0]
    assert group_count("default", 5) == 2
    assert groups("default", 5, 0, -1) == [
        GroupRow("g1", 2, first),
        GroupRow("g2", 1, only),
    ]
    assert groups("default", 5, 1, 1) == [GroupRow("g2", 1, only)]


def reserve(client: redis.Redis, jobs: Jobs) -> None:
    """Reserve one job of ``default`` under a ``group_concurrency`` of 1."""
    got = transitions.reserve(
        client, jobs.keys(), lease_ms=60_000, worker_id="w", group_concurrency=1
    )
    assert got is not None


def test_groups_parked_at_their_cap_are_listed_after_the_ring(
    jobs: Jobs, rqueue_redis: redis.Redis
) -> None:
    ids = {g: [jobs.queued(priority=3, group=g) for _ in range(2)] for g in ("p", "q", "r")}
    jobs.queued(group="other")
    for _ in range(2):  # p, then q, reach the cap of 1 and are parked with one job each
        reserve(rqueue_redis, jobs)
    assert rqueue_redis.llen(jobs.keys().ring(3)) == 1  # only r is left in the ring

    assert priorities("default") == [3, 0]
    assert group_count("default", 3) == 3
    assert groups("default", 3, 0, -1) == [
        GroupRow("r", 2, ids["r"][0]),
        GroupRow("p", 1, ids["p"][1], parked=True),
        GroupRow("q", 1, ids["q"][1], parked=True),
    ]
    assert groups("default", 3, 1, 1) == [GroupRow("p", 1, ids["p"][1], parked=True)]
    assert groups("default", 3, 2, 5) == [GroupRow("q", 1, ids["q"][1], parked=True)]
    # The last job of priority 3 that may run: its tab stays while the parked ones wait.
    reserve(rqueue_redis, jobs)
    assert rqueue_redis.zscore(jobs.keys().prios, 3) is None
    assert priorities("default") == [3, 0]


# -- JobSource -------------------------------------------------------------------


def test_failed_jobs_are_listed_newest_first_in_slices(
    jobs: Jobs, rqueue_redis: redis.Redis
) -> None:
    created = []
    for n in range(5):
        created.append(jobs.failed(name=f"tests.jobs_app.jobs.n{n}"))
        tick(rqueue_redis)
    source = JobSource("default", JobStatus.FAILED)

    assert source.count() == len(source) == 5
    newest_first = created[::-1]
    assert ids(source[0:2]) == newest_first[:2]
    assert ids(source[2:5]) == newest_first[2:]
    assert ids(source[3:10]) == newest_first[3:]  # a slice past the end stops at it
    assert source[3:3] == []
    row = source[1]
    assert row.id == newest_first[1]
    assert row.job is not None and row.job.name == "tests.jobs_app.jobs.n3"
    assert row.job.status is JobStatus.FAILED
    assert row.at == row.job.finished_at  # the failed zset's score: when it failed


def test_queued_jobs_are_listed_per_group_in_fifo_order(jobs: Jobs) -> None:
    queued = [jobs.queued(group="g") for _ in range(3)]
    jobs.queued()  # the default group's
    # A state's name is accepted (as the admin's URLs give it).
    source = JobSource("default", "queued", group="g")  # type: ignore[arg-type]

    assert source.state is JobStatus.QUEUED
    assert source.count() == 3
    rows = source[0:3]
    assert ids(rows) == queued
    assert all(row.at is None for row in rows)  # a list has no scores


def test_scheduled_and_running_jobs_are_listed_soonest_first(jobs: Jobs) -> None:
    later = jobs.scheduled(delay_ms=7_200_000)
    sooner = jobs.scheduled(delay_ms=3_600_000)
    running = jobs.running()

    scheduled = JobSource("default", JobStatus.SCHEDULED)[0:5]
    assert ids(scheduled) == [sooner, later]
    sooner_job = get_job(sooner)
    assert sooner_job is not None and scheduled[0].at == sooner_job.run_at
    [row] = JobSource("default", JobStatus.RUNNING)[0:5]
    assert row.id == running and row.at is not None  # the lease deadline


def test_a_listed_job_whose_record_is_gone_has_no_job(
    jobs: Jobs, rqueue_redis: redis.Redis
) -> None:
    failed = jobs.failed()
    rqueue_redis.delete(jobs.keys().job(failed))

    [row] = JobSource("default", JobStatus.FAILED)[0:1]

    assert row.id == failed and row.job is None


@pytest.mark.parametrize("state", ["cancelled", "nonsense"])
def test_a_state_without_a_listing_is_refused(state: str) -> None:
    with pytest.raises(ValueError, match="unknown state"):
        JobSource("default", state)  # type: ignore[arg-type]


# -- filtered_page ---------------------------------------------------------------


@pytest.fixture
def alternating(
    jobs: Jobs, rqueue_redis: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> list[str]:
    """12 failed jobs named a, b, a, b... (oldest first), scanned 3 per read, 6 per page."""
    monkeypatch.setattr(listings, "SCAN_CHUNK", 3)
    monkeypatch.setattr(listings, "SCAN_LIMIT", 6)
    created = []
    for n in range(12):
        created.append(jobs.failed(name="a" if n % 2 == 0 else "b"))
        tick(rqueue_redis)
    return created


def test_a_filtered_page_scans_a_bounded_window_and_returns_a_cursor(
    alternating: list[str],
) -> None:
    source = JobSource("default", JobStatus.FAILED)
    # Newest first: ranks 0..11 are jobs 11..0; the "a" jobs (even) sit at odd ranks.
    first = filtered_page(source, "a", 0, 10)

    assert ids(first.rows) == [alternating[10], alternating[8], alternating[6]]
    assert (first.next_cursor, first.scanned) == (6, 6)  # stopped at SCAN_LIMIT
    assert all(row.job is not None and row.job.name == "a" for row in first.rows)

    rest = filtered_page(source, "a", 6, 10)

    assert ids(rest.rows) == [alternating[4], alternating[2], alternating[0]]
    assert (rest.next_cursor, rest.scanned) == (None, 6)  # the end of the store


def test_a_filtered_page_stops_when_it_is_full(alternating: list[str]) -> None:
    source = JobSource("default", JobStatus.FAILED)

    page = filtered_page(source, "a", 0, 2)

    assert ids(page.rows) == [alternating[10], alternating[8]]
    assert (page.next_cursor, page.scanned) == (4, 4)  # just past the second match


def test_a_filtered_page_of_an_absent_name_is_empty_but_bounded(
    alternating: list[str],
) -> None:
    source = JobSource("default", JobStatus.FAILED)

    assert filtered_page(source, "zzz", 0, 10) == FilteredPage([], 6, 6)
    assert filtered_page(source, "zzz", 6, 10) == FilteredPage([], None, 6)


# -- warnings --------------------------------------------------------------------


def test_a_scheduled_job_over_a_minute_late_is_overdue(jobs: Jobs) -> None:
    jobs.scheduled()
    counts = queue_counts("default")
    due = counts.next_scheduled_at
    assert due is not None

    assert queue_warnings([counts]) == []  # due in an hour
    assert queue_warnings([counts], now=due + datetime.timedelta(seconds=59)) == []
    late = queue_warnings([counts], now=due + datetime.timedelta(seconds=61.5))
    assert late == [QueueWarning(WarningKind.OVERDUE, queue="default", late=61)]
    empty = queue_counts("emails")
    assert queue_warnings([empty], now=due + datetime.timedelta(days=1)) == []


def test_worker_warnings_follow_the_live_workers(rqueue_redis: redis.Redis) -> None:
    assert worker_warnings(list_workers()) == [QueueWarning(WarningKind.NO_WORKER)]

    publish(WorkerInfo(id="w:1:a", poller=False), ttl=30)
    assert worker_warnings(list_workers()) == [QueueWarning(WarningKind.NO_POLLER)]

    publish(WorkerInfo(id="w:2:b", poller=True), ttl=30)
    assert worker_warnings(list_workers()) == []
