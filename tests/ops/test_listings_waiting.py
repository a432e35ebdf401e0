"""The ``waiting`` listing (issue 26): the ids of the queue's ``waiting`` zset, the soonest
dependency deadline first, on the Redis state the transition scripts write."""

from __future__ import annotations

from django_rqueue import JobStatus
from django_rqueue.engine.connection import ms_to_datetime, redis_time_ms
from django_rqueue.ops.listings import STATES, JobSource, filtered_page
from tests.support.jobs_in_state import Jobs

from . import dependents


def test_waiting_jobs_are_listed_soonest_deadline_first_and_none_last(jobs: Jobs) -> None:
    now = redis_time_ms(jobs.client)
    never = dependents.waiting(jobs, deadline_ms=float("inf"))
    later = dependents.waiting(jobs, deadline_ms=now + 7_200_000)
    sooner = dependents.waiting(jobs, deadline_ms=now + 3_600_000, missing=1)
    jobs.scheduled()  # not waiting
    dependents.waiting(jobs, queue="emails")  # another queue's

    source = JobSource("default", JobStatus.WAITING)
    rows = source[0:10]

    assert JobStatus.WAITING in STATES
    assert source.count() == 3
    assert [r.id for r in rows] == [sooner, later, never]
    assert [r.at for r in rows] == [
        ms_to_datetime(now + 3_600_000),
        ms_to_datetime(now + 7_200_000),
        None,  # no dependency deadline
    ]
    job = rows[0].job
    assert job is not None and job.status is JobStatus.WAITING
    assert job.inputs is not None and (job.inputs.count, job.inputs.missing) == (2, 1)


def test_a_waiting_listing_pages_and_filters_by_name(jobs: Jobs) -> None:
    now = redis_time_ms(jobs.client)
    named = [
        dependents.waiting(jobs, deadline_ms=now + n * 1000, name=f"tests.jobs_app.jobs.{kind}")
        for n, kind in enumerate(["record", "noop", "record"], 1)
    ]

    source = JobSource("default", JobStatus.WAITING)
    found = filtered_page(source, "tests.jobs_app.jobs.record", 0, 10)

    assert [r.id for r in source[1:3]] == named[1:]
    assert [r.id for r in found.rows] == [named[0], named[2]]
    assert found.next_cursor is None
