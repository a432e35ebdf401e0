"""``django_rqueue.testing.capture_jobs``: enqueued calls are recorded, not sent to Redis."""

from __future__ import annotations

import datetime
import threading

import pytest
import redis
from pytest_django.fixtures import Settings as SettingsFixture

from django_rqueue import Job, JobStatus, get_job
from django_rqueue.testing import CapturedJobs, capture_jobs
from tests.conftest import Event
from tests.jobs_app.jobs import chain, fail_always, read_ledger, record, retries_itself
from tests.support.inprocess import tags


def test_capture_records_name_args_kwargs_and_resolved_options(
    ledger: str, rqueue_redis: redis.Redis, events: list[Event]
) -> None:
    with capture_jobs() as captured:
        plain = record.delay(ledger, "a")
        later = record.using(
            queue="emails",
            priority=5,
            delay=60,
            group="g",
            unique_key="k",
            max_attempts=4,
            expires=datetime.timedelta(minutes=2),
        ).delay(ledger, tag="b")
        at = datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC)
        batch = fail_always.using(run_at=at, expires=at + datetime.timedelta(hours=1)).delay_many(
            [((ledger, "c"), {}), ((ledger, "d"), {})]
        )

    assert isinstance(captured, CapturedJobs) and len(captured) == 4
    assert rqueue_redis.dbsize() == 0
    assert read_ledger(ledger) == [] and events == []  # nothing ran, nothing was announced

    first, second, third, fourth = captured
    assert (first.name, first.args, first.kwargs) == (record.name, [ledger, "a"], {})
    assert first.options["queue"] == "default" and first.options["delay"] is None
    assert first.options["run_at"] is None and first.options["on_commit"] is True
    assert first.options["expires"] is None
    assert first.job is plain and plain.status is JobStatus.QUEUED
    assert plain.id.startswith("default:") and len(plain.id) > len("default:")

    assert (second.args, second.kwargs) == ([ledger], {"tag": "b"})
    assert {k: second.options[k] for k in ("queue", "priority", "group", "unique_key")} == {
        "queue": "emails",
        "priority": 5,
        "group": "g",
        "unique_key": "k",
    }
    assert second.options["delay"] == 60 and second.options["max_attempts"] == 4
    assert second.options["expires"] == 120
    assert later.status is JobStatus.SCHEDULED and later.queue == "emails"

    assert [c.name for c in (third, fourth)] == [fail_always.name] * 2
    assert third.options["run_at"] == at and batch[0].run_at == at
    assert third.options["expires"] == at + datetime.timedelta(hours=1)
    assert [j.status for j in batch] == [JobStatus.SCHEDULED] * 2
    assert [c.job for c in captured.of(fail_always)] == batch
    assert len({c.job.id for c in captured}) == 4


def test_run_all_runs_the_captured_jobs_inline_as_eager_does(
    ledger: str, rqueue_redis: redis.Redis, events: list[Event]
) -> None:
    with capture_jobs() as captured:
        ok = record.delay(ledger, "a")
        bad = fail_always.delay(ledger, "b")
        retried = retries_itself.delay(ledger, "c", 1, 3600)
        chained = chain.delay(ledger, "d", "default", "e")  # enqueues record(ledger, "e")
        done = captured.run_all()
        assert captured.run_all() == []  # each job runs once

    assert rqueue_redis.dbsize() == 0
    assert done[:4] == [ok, bad, retried, chained]  # the same Job objects .delay() returned
    assert ok.status is JobStatus.SUCCEEDED and ok.result == "a"
    assert bad.status is JobStatus.FAILED and bad.attempts == 3
    assert retried.status is JobStatus.SUCCEEDED and retried.result == 2
    assert chained.status is JobStatus.SUCCEEDED
    assert len(captured) == 5 and captured[4].name == record.name and captured[4].ran
    assert done[4].status is JobStatus.SUCCEEDED
    assert tags(ledger) == ["a", "b", "b", "b", "c", "c", "d", "e"]
    assert ("job_failed", fail_always) in [(name, sender) for name, sender, _ in events]


def test_capture_wins_over_eager_and_still_validates(
    ledger: str, settings: SettingsFixture, rqueue_redis: redis.Redis
) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "EAGER": True}
    with capture_jobs() as captured:
        job = record.delay(ledger, "a")
        with pytest.raises(ValueError, match="not declared"):
            record.using(queue="nope").delay(ledger, "x")
        with pytest.raises(TypeError, match="tag"):
            record.delay(ledger, object())  # type: ignore[arg-type]
    assert job.status is JobStatus.QUEUED and len(captured) == 1
    assert read_ledger(ledger) == [] and rqueue_redis.dbsize() == 0


def test_nested_captures_threads_and_leaving_the_block(
    ledger: str, rqueue_redis: redis.Redis
) -> None:
    from_thread: list[Job[str]] = []
    with capture_jobs() as outer:
        record.delay(ledger, "outer")
        with capture_jobs() as inner:
            record.delay(ledger, "inner")
        thread = threading.Thread(target=lambda: from_thread.append(record.delay(ledger, "t")))
        thread.start()
        thread.join()
    after = record.delay(ledger, "after")

    assert [c.args[1] for c in outer] == ["outer"]
    assert [c.args[1] for c in inner] == ["inner"]
    for real in (from_thread[0], after):  # a thread starts with an empty context
        stored = get_job(real.id)
        assert stored is not None and stored.status is JobStatus.QUEUED
