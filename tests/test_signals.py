"""Signals sent by ``.delay()`` and by the worker, with their documented kwargs."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import redis
from django.dispatch import Signal

from django_rqueue import Job, JobStatus, get_job, signals
from django_rqueue.serialization import encode_arguments
from tests.conftest import Event
from tests.jobs_app.jobs import fail_always, read_ledger, record, rejects, retries_itself
from tests.support.inprocess import poller_thread, run_worker
from tests.support.jobs_in_state import enqueue_raw

SIGNALS = {
    "job_enqueued": signals.job_enqueued,
    "job_started": signals.job_started,
    "job_succeeded": signals.job_succeeded,
    "job_retrying": signals.job_retrying,
    "job_failed": signals.job_failed,
}

pytestmark = pytest.mark.usefixtures("worker_may_close_db_connections")


def test_delay_sends_job_enqueued(ledger: str, events: list[Event]) -> None:
    job = record.delay(ledger, "a")

    assert len(events) == 1
    name, sender, kwargs = events[0]
    assert name == "job_enqueued"
    assert sender is record
    assert set(kwargs) == {"job"}
    assert isinstance(kwargs["job"], Job)
    assert kwargs["job"].id == job.id
    assert kwargs["job"].status is JobStatus.QUEUED


def test_success_sends_started_then_succeeded(ledger: str, events: list[Event]) -> None:
    job = record.delay(ledger, "a")
    events.clear()

    run_worker(burst=True)

    assert [(name, sender) for name, sender, _ in events] == [
        ("job_started", record),
        ("job_succeeded", record),
    ]
    started, succeeded = events[0][2], events[1][2]
    assert set(started) == {"job"}
    assert started["job"].id == job.id
    assert started["job"].attempts == 1  # already counts this attempt
    assert started["job"].args == [ledger, "a"]
    assert set(succeeded) == {"job", "result"}
    assert succeeded["job"].id == job.id
    assert succeeded["result"] == "a"


def test_failures_send_retrying_with_delay_then_failed(ledger: str, events: list[Event]) -> None:
    job = fail_always.delay(ledger, "x")  # max_attempts=3, backoff 0.1 s * attempt
    events.clear()

    with poller_thread():
        run_worker(max_jobs=3)

    assert [name for name, _, _ in events] == [
        "job_started",
        "job_retrying",
        "job_started",
        "job_retrying",
        "job_started",
        "job_failed",
    ]
    assert all(sender is fail_always for _, sender, _ in events)
    retrying = [kw for name, _, kw in events if name == "job_retrying"]
    for attempt, kwargs in enumerate(retrying, start=1):
        assert set(kwargs) == {"job", "exception", "traceback", "delay"}
        assert kwargs["job"].id == job.id
        assert kwargs["job"].attempts == attempt
        assert isinstance(kwargs["exception"], RuntimeError)
        assert str(kwargs["exception"]) == "boom x"
        assert isinstance(kwargs["traceback"], str)
        assert "RuntimeError: boom x" in kwargs["traceback"]
        assert type(kwargs["delay"]) is float
        assert kwargs["delay"] == pytest.approx(0.1 * attempt)
    failed = events[-1][2]
    assert set(failed) == {"job", "exception", "traceback"}
    assert failed["job"].id == job.id
    assert failed["job"].attempts == 3
    assert isinstance(failed["exception"], RuntimeError)
    assert isinstance(failed["traceback"], str)
    assert "in fail_always" in failed["traceback"]
    # Sent once the job is really in the failed store.
    assert get_job(job.id).status is JobStatus.FAILED  # type: ignore[union-attr]


def test_unknown_job_fails_with_sender_none(events: list[Event]) -> None:
    job_id = enqueue_raw("no.such.job", encode_arguments([], {}))

    run_worker(burst=True)

    assert [(name, sender) for name, sender, _ in events] == [("job_failed", None)]
    kwargs = events[0][2]
    assert kwargs["job"].id == job_id
    assert type(kwargs["exception"]).__name__ == "UnknownJob"
    assert isinstance(kwargs["traceback"], str) and kwargs["traceback"]


def test_signals_are_sent_in_the_worker_only_after_redis_is_updated(ledger: str) -> None:
    states: dict[str, JobStatus | None] = {}

    def on_succeeded(sender: object, job: Job[Any], **kwargs: Any) -> None:
        found = get_job(job.id)
        states["succeeded"] = found.status if found else None

    signals.job_succeeded.connect(on_succeeded, weak=False)
    try:
        record.delay(ledger, "a")
        run_worker(burst=True)
    finally:
        signals.job_succeeded.disconnect(on_succeeded)
    assert states == {"succeeded": JobStatus.SUCCEEDED}


@pytest.mark.parametrize("signal_name", list(SIGNALS))
def test_a_receiver_that_raises_is_logged_and_never_breaks_the_worker(
    ledger: str,
    rqueue_redis: redis.Redis,
    caplog: pytest.LogCaptureFixture,
    signal_name: str,
) -> None:
    sig: Signal = SIGNALS[signal_name]

    def broken(sender: object, **kwargs: Any) -> None:
        raise ZeroDivisionError(f"broken receiver of {signal_name}")

    sig.connect(broken, weak=False)
    caplog.set_level(logging.ERROR, logger="django_rqueue")
    try:
        ok = [record.delay(ledger, tag) for tag in ("a", "b")]
        bad = fail_always.using(max_attempts=2).delay(ledger, "x")
        with poller_thread():
            run_worker(max_jobs=4)
    finally:
        sig.disconnect(broken)

    assert [e["tag"] for e in read_ledger(ledger)] == ["a", "b", "x", "x"]
    for job in ok:
        assert get_job(job.id).status is JobStatus.SUCCEEDED  # type: ignore[union-attr]
    assert get_job(bad.id).status is JobStatus.FAILED  # type: ignore[union-attr]
    logged = [
        r.exc_info[0]
        for r in caplog.records
        if r.name.startswith("django_rqueue") and r.levelno >= logging.ERROR and r.exc_info
    ]
    assert ZeroDivisionError in logged, "the receiver's exception was not logged"
    # Besides it, only fail_always's final failure, logged with its own traceback.
    assert set(logged) <= {ZeroDivisionError, RuntimeError}, logged
    assert f"broken receiver of {signal_name}" in caplog.text


def test_a_receiver_connected_with_sender_is_a_per_job_hook(ledger: str) -> None:
    """``connect(receiver, sender=<job function>)``: the receiver hears that job only."""
    heard: list[tuple[str, str, str]] = []

    def on_success(sender: object, job: Job[Any], **kwargs: Any) -> None:
        heard.append(("succeeded", job.name, job.args[1]))

    def on_failure(sender: object, job: Job[Any], **kwargs: Any) -> None:
        heard.append(("failed", job.name, job.args[1]))

    signals.job_succeeded.connect(on_success, sender=record, weak=False)
    signals.job_failed.connect(on_failure, sender=fail_always, weak=False)
    try:
        record.delay(ledger, "ok")
        fail_always.using(max_attempts=1).delay(ledger, "bad")
        record.delay(ledger, "ok2")
        retries_itself.delay(ledger, "other success", 0, None)  # neither receiver hears these
        rejects.delay(ledger, "other failure")
        run_worker(burst=True)
    finally:
        signals.job_succeeded.disconnect(on_success, sender=record)
        signals.job_failed.disconnect(on_failure, sender=fail_always)

    assert sorted(heard) == [
        ("failed", fail_always.name, "bad"),
        ("succeeded", record.name, "ok"),
        ("succeeded", record.name, "ok2"),
    ]
    assert len(read_ledger(ledger)) == 5  # every job ran
