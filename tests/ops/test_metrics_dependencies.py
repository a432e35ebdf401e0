"""The Prometheus view's series of waiting jobs, the outbox and workflows (issue 26), on the
Redis state the transition scripts write (:mod:`tests.ops.dependents`)."""

from __future__ import annotations

import redis
from django.test import Client

from django_rqueue.engine.connection import redis_time_ms
from django_rqueue.engine.fields import StatsFields
from tests.support.jobs_in_state import Jobs

from . import dependents
from .test_metrics import QUEUES, Scrape


def test_waiting_jobs_are_a_state_of_rqueue_jobs(client: Client, jobs: Jobs) -> None:
    dependents.waiting(jobs)
    dependents.waiting(jobs)
    dependents.waiting(jobs, queue="emails")

    scrape = Scrape(client)

    assert scrape.per_queue("rqueue_jobs", state="waiting") == {
        "default": 2.0,
        "emails": 1.0,
        "low": 0.0,
    }
    assert scrape.jobs()["scheduled"] == 0.0


def test_released_and_dependency_cancels_are_job_totals(
    client: Client, jobs: Jobs, rqueue_redis: redis.Redis
) -> None:
    dependents.count(rqueue_redis, jobs, StatsFields.RELEASED, 7)
    dependents.count(rqueue_redis, jobs, StatsFields.DEPENDENCY_FAILED, 2)
    dependents.count(rqueue_redis, jobs, StatsFields.DEPENDENCY_TIMEOUT, 1, queue="emails")

    scrape = Scrape(client)

    assert scrape.per_queue("rqueue_jobs_released_total") == {
        "default": 7.0,
        "emails": 0.0,
        "low": 0.0,
    }
    assert scrape.value("rqueue_jobs_dependency_failed_total", queue="default") == 2.0
    assert scrape.per_queue("rqueue_jobs_dependency_timeout_total") == {
        "default": 0.0,
        "emails": 1.0,
        "low": 0.0,
    }
    assert scrape.families["rqueue_jobs_released"].type == "counter"


def test_the_outbox_series_count_entries_and_the_oldest_age(
    client: Client, jobs: Jobs, rqueue_redis: redis.Redis
) -> None:
    empty = Scrape(client)
    now = redis_time_ms(rqueue_redis)
    dependents.outbox_entry(rqueue_redis, jobs, at=f"{now - 75_000}-0")
    dependents.outbox_entry(rqueue_redis, jobs)

    scrape = Scrape(client)
    after = redis_time_ms(rqueue_redis)

    assert empty.per_queue("rqueue_outbox_pending") == dict.fromkeys(QUEUES, 0.0)
    assert empty.per_queue("rqueue_outbox_oldest_age_seconds") == dict.fromkeys(QUEUES, 0.0)
    assert scrape.per_queue("rqueue_outbox_pending") == {"default": 2.0, "emails": 0.0, "low": 0.0}
    age = scrape.value("rqueue_outbox_oldest_age_seconds", queue="default")
    assert 75.0 <= age <= (after - now + 75_000) / 1000
    assert scrape.families["rqueue_outbox_oldest_age_seconds"].type == "gauge"


def test_workflows_running_and_finished_by_state(
    client: Client, jobs: Jobs, rqueue_redis: redis.Redis
) -> None:
    dependents.count(rqueue_redis, jobs, StatsFields.WORKFLOWS_STARTED, 9)
    dependents.count(rqueue_redis, jobs, StatsFields.WORKFLOWS_SUCCEEDED, 4)
    dependents.count(rqueue_redis, jobs, StatsFields.WORKFLOWS_FAILED, 2)
    dependents.count(rqueue_redis, jobs, StatsFields.WORKFLOWS_CANCELLED, 1)

    scrape = Scrape(client)

    assert scrape.per_queue("rqueue_workflows_running") == {
        "default": 2.0,
        "emails": 0.0,
        "low": 0.0,
    }
    finished = {
        state: scrape.value("rqueue_workflows_finished_total", queue="default", state=state)
        for state in ("succeeded", "failed", "cancelled")
    }
    assert finished == {"succeeded": 4.0, "failed": 2.0, "cancelled": 1.0}
    assert scrape.families["rqueue_workflows_finished"].type == "counter"

    dependents.count(rqueue_redis, jobs, StatsFields.WORKFLOWS_CANCELLED)
    assert Scrape(client).value("rqueue_workflows_running", queue="default") == 1.0
