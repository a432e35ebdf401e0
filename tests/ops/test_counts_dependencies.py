"""``queue_counts`` of waiting jobs, the outbox and workflows (issue 26), on the Redis state
the transition scripts write (:mod:`tests.ops.dependents`), against a real Redis."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, cast

import redis

from django_rqueue.engine.connection import redis_time_ms
from django_rqueue.engine.fields import StatsFields
from django_rqueue.ops.counts import QueueCounts, queue_counts
from tests.support.jobs_in_state import Jobs
from tests.support.redis_cluster import LocalCluster

from . import dependents


@contextmanager
def round_trips() -> Iterator[list[int]]:
    """Count the packed sends of every connection (one per round trip) inside the block."""
    sent = [0]
    original: Callable[..., Any] = redis.connection.AbstractConnection.send_packed_command

    def counting(self: Any, command: Any, check_health: bool = True) -> None:
        sent[0] += 1
        original(self, command, check_health)

    redis.connection.AbstractConnection.send_packed_command = counting  # type: ignore[method-assign]
    try:
        yield sent
    finally:
        redis.connection.AbstractConnection.send_packed_command = original  # type: ignore[method-assign]


def test_waiting_jobs_are_counted_and_the_count_follows_the_zset(jobs: Jobs) -> None:
    dependents.waiting(jobs)
    dependents.waiting(jobs, queue="emails")  # another queue's

    assert queue_counts("default").waiting == 1
    assert queue_counts("default").scheduled == 0  # taken out of `delayed`

    second = dependents.waiting(jobs)
    assert queue_counts("default").waiting == 2
    jobs.client.zrem(jobs.keys().waiting, second)  # released, as a script does
    assert queue_counts("default").waiting == 1


def test_dependency_counters_are_read_from_stats(jobs: Jobs, rqueue_redis: redis.Redis) -> None:
    dependents.count(rqueue_redis, jobs, StatsFields.RELEASED, 5)
    dependents.count(rqueue_redis, jobs, StatsFields.DEPENDENCY_FAILED, 2)
    dependents.count(rqueue_redis, jobs, StatsFields.DEPENDENCY_TIMEOUT, 3)

    counts = queue_counts("default")
    assert (
        counts.released_total,
        counts.dependency_failed_total,
        counts.dependency_timeout_total,
    ) == (5, 2, 3)

    dependents.count(rqueue_redis, jobs, StatsFields.DEPENDENCY_TIMEOUT)
    assert queue_counts("default").dependency_timeout_total == 4


def test_running_workflows_are_the_started_minus_the_finished(
    jobs: Jobs, rqueue_redis: redis.Redis
) -> None:
    dependents.count(rqueue_redis, jobs, StatsFields.WORKFLOWS_STARTED, 10)
    dependents.count(rqueue_redis, jobs, StatsFields.WORKFLOWS_SUCCEEDED, 4)
    dependents.count(rqueue_redis, jobs, StatsFields.WORKFLOWS_FAILED, 2)
    dependents.count(rqueue_redis, jobs, StatsFields.WORKFLOWS_CANCELLED, 1)

    counts = queue_counts("default")
    assert counts.workflows_running == 3
    assert (
        counts.workflows_succeeded_total,
        counts.workflows_failed_total,
        counts.workflows_cancelled_total,
    ) == (4, 2, 1)

    dependents.count(rqueue_redis, jobs, StatsFields.WORKFLOWS_SUCCEEDED)
    assert queue_counts("default").workflows_running == 2
    assert queue_counts("emails").workflows_running == 0  # counted on the home queue only


def test_corrupt_workflow_counters_never_make_a_negative_running_count(
    jobs: Jobs, rqueue_redis: redis.Redis
) -> None:
    dependents.count(rqueue_redis, jobs, StatsFields.WORKFLOWS_FAILED, 3)

    assert queue_counts("default").workflows_running == 0


def test_the_outbox_counts_its_entries_and_the_age_of_the_oldest_by_the_redis_clock(
    jobs: Jobs, rqueue_redis: redis.Redis
) -> None:
    assert queue_counts("default").outbox_pending == 0
    assert queue_counts("default").outbox_oldest_at is None
    now = redis_time_ms(rqueue_redis)
    oldest = dependents.outbox_entry(rqueue_redis, jobs, at=f"{now - 90_000}-0")
    dependents.outbox_entry(rqueue_redis, jobs, at=f"{now - 30_000}-0")
    dependents.outbox_entry(rqueue_redis, jobs, queue="emails")

    counts = queue_counts("default")
    after = redis_time_ms(rqueue_redis)

    assert counts.outbox_pending == 2
    assert counts.outbox_oldest_at is not None
    assert int(counts.outbox_oldest_at.timestamp() * 1000) == now - 90_000
    assert 90.0 <= counts.outbox_oldest_age <= (after - now + 90_000) / 1000

    rqueue_redis.xdel(jobs.keys().outbox, oldest)  # relayed: the relay deletes it
    counts = queue_counts("default")
    assert counts.outbox_pending == 1
    assert 30.0 <= counts.outbox_oldest_age < 90.0


def test_a_queue_without_workflows_counts_none_and_costs_the_same_round_trips(
    jobs: Jobs, rqueue_redis: redis.Redis
) -> None:
    jobs.queued()
    queue_counts("default")  # the connection is open from here on
    with round_trips() as plain:
        counts = queue_counts("default")
    assert (counts.waiting, counts.outbox_pending, counts.workflows_running) == (0, 0, 0)

    dependents.waiting(jobs)
    dependents.outbox_entry(rqueue_redis, jobs)
    dependents.count(rqueue_redis, jobs, StatsFields.WORKFLOWS_STARTED)
    with round_trips() as busy:
        counts = queue_counts("default")

    assert (counts.waiting, counts.outbox_pending, counts.workflows_running) == (1, 1, 1)
    # One pipeline for the counts, three for the oldest queued job (one priority, one group).
    assert plain == busy == [4]


def test_an_empty_queue_still_counts_nothing(rqueue_redis: redis.Redis) -> None:
    assert queue_counts("low") == QueueCounts("low")


def test_on_a_cluster_the_outbox_age_reads_the_clock_after_the_pipeline(
    redis_cluster: LocalCluster,
) -> None:
    with redis_cluster.client() as own:  # the test's own client, of the default user
        client = cast(redis.Redis, own)  # a cluster client serves as one
        jobs = Jobs(client)
        dependents.waiting(jobs)
        assert queue_counts("default").outbox_oldest_age == 0.0
        now = redis_time_ms(client)
        dependents.outbox_entry(client, jobs, at=f"{now - 120_000}-0")

        counts = queue_counts("default")

    assert (counts.waiting, counts.outbox_pending) == (1, 1)
    assert 120.0 <= counts.outbox_oldest_age < 180.0
