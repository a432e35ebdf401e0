"""Periodic entries at run time (django_rqueue.periodic.runtime): run now, pause, resume, states."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
import redis
from pytest_django.fixtures import Settings as SettingsFixture

from django_rqueue import JobStatus, get_job
from django_rqueue.engine.keys import QueueKeys
from django_rqueue.exceptions import UnknownEntry, UnknownJob
from django_rqueue.periodic import runtime
from django_rqueue.worker.scheduler import Scheduler

KEYS = QueueKeys.of("rqueue", "default")


@pytest.fixture
def schedule(settings: SettingsFixture, ledger: str) -> dict[str, Any]:
    entries = {
        "ping": {"job": "tests.jobs_app.jobs.record", "every": 60, "args": [ledger, "p"]},
        "mail": {
            "job": "tests.jobs_app.jobs.record",
            "every": 60,
            "args": [ledger],
            "kwargs": {"tag": "m"},
            "queue": "emails",
            "priority": -5,
        },
        "ghost": {"job": "no.such.job", "every": 60},
        "misfit": {"job": "tests.jobs_app.jobs.record", "every": 60, "args": [1, 2, 3]},
    }
    settings.RQUEUE = {**settings.RQUEUE, "SCHEDULE": entries}
    return entries


def test_resolve_gives_the_entrys_options_over_the_jobs(schedule: dict[str, Any]):
    resolved = runtime.resolve(runtime.entry("mail"))
    assert (resolved.queue, resolved.plan.priority, resolved.plan.group) == ("emails", -5, "")
    assert runtime.resolve(runtime.entry("ping")).queue == "default"


def test_resolve_refuses_unknown_jobs_and_arguments_that_do_not_fit(schedule: dict[str, Any]):
    with pytest.raises(UnknownJob):
        runtime.resolve(runtime.entry("ghost"))
    with pytest.raises(TypeError):
        runtime.resolve(runtime.entry("misfit"))
    with pytest.raises(UnknownEntry):
        runtime.entry("nope")


def test_run_now_enqueues_a_job_with_the_entrys_arguments(
    schedule: dict[str, Any], ledger: str, events: list[Any]
):
    job = runtime.run_now("mail")
    stored = get_job(job.id)
    assert stored is not None
    assert stored.status is JobStatus.QUEUED
    assert (stored.queue, stored.priority, stored.args, stored.kwargs) == (
        "emails",
        -5,
        [ledger],
        {"tag": "m"},
    )
    assert [name for name, _s, _k in events] == ["job_enqueued"]
    (state,) = runtime.entry_states(["mail"])
    assert state.last_job_id == job.id and state.last_run is not None


def test_a_run_gets_the_expiry_of_its_job_counted_from_its_enqueue(
    settings: SettingsFixture, ledger: str
):
    fresh = {"job": "tests.jobs_app.jobs.perishable", "every": 60, "args": [ledger, "f"]}
    settings.RQUEUE = {**settings.RQUEUE, "SCHEDULE": {"fresh": fresh}}
    job = runtime.run_now("fresh")
    stored = get_job(job.id)
    assert stored is not None and stored.enqueued_at is not None
    assert stored.expires_at == stored.enqueued_at + datetime.timedelta(minutes=10)


def test_entry_states_before_and_after_a_poller_stored_the_entries(
    schedule: dict[str, Any], rqueue_redis: redis.Redis
):
    before = {s.name: s for s in runtime.entry_states()}
    assert list(before) == ["ghost", "mail", "misfit", "ping"]
    assert before["ping"].next_run is None and before["ping"].last_run is None
    assert before["ghost"].queue is None and "no.such.job" in before["ghost"].error
    assert "misfit" in before and before["misfit"].error
    Scheduler(["default", "emails"]).run_once()
    after = {s.name: s for s in runtime.entry_states()}
    assert after["ping"].next_run is not None
    assert after["ping"].next_run.timestamp() % 60 == 0
    assert after["mail"].queue == "emails"
    with pytest.raises(UnknownEntry):
        runtime.entry_states(["nope"])


def test_pause_and_resume_flag_the_entry(schedule: dict[str, Any], rqueue_redis: redis.Redis):
    runtime.pause("ping")
    assert runtime.entry_states(["ping"])[0].paused
    runtime.resume("ping")
    assert not runtime.entry_states(["ping"])[0].paused
    with pytest.raises(UnknownEntry):
        runtime.pause("nope")
