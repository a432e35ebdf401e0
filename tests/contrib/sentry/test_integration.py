"""The Sentry integration in this process (django_rqueue.contrib.sentry): one event per
failed job with its tags, none for a retry that later succeeds (unless asked), none for
``Reject`` or ``Retry``, the trace continued from the enqueue to the attempt, nothing done
while no client has the integration, and the options checked."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis
import sentry_sdk
from pytest_django.fixtures import Settings as SettingsFixture

from django_rqueue import JobStatus
from django_rqueue.contrib.sentry import RqueueIntegration
from django_rqueue.job import Job
from django_rqueue.sensitive import MASK
from tests.jobs_app.jobs import (
    async_record,
    fail_always,
    fail_then_succeed,
    fault_async_flaky,
    log_in,
    record,
    rejects,
    retries_itself,
    sleepy_timeout,
)
from tests.support.inprocess import run_worker

from .conftest import Start
from .recording import items

#: The in-process worker closes old database connections around each job, as real ones do.
pytestmark = pytest.mark.usefixtures("worker_may_close_db_connections")


@pytest.fixture
def eager(settings: SettingsFixture) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "EAGER": True}


def trace_of(header: str) -> tuple[str, str]:
    """``(trace id, span id)`` of a ``sentry-trace`` header."""
    trace_id, span_id, *_ = header.split("-")
    return trace_id, span_id


@pytest.mark.usefixtures("eager")
def test_a_failed_job_is_one_event_with_its_tags(sentry: Start, ledger: str) -> None:
    envelopes = sentry()
    job = fail_always.delay(ledger, "x")
    assert job.status is JobStatus.FAILED and job.attempts == 3
    [event] = items(envelopes, "event")
    assert event["tags"] == {
        "rqueue.job": fail_always.name,
        "rqueue.queue": "default",
        "rqueue.attempt": "3",
        "rqueue.job_id": job.id,
        "rqueue.outcome": "failed",
    }
    assert event["level"] == "error"
    [exception] = event["exception"]["values"]
    assert exception["type"] == "RuntimeError" and exception["value"] == "boom x"
    assert exception["mechanism"] == {"type": "rqueue", "handled": False}
    extra = event["extra"]["rqueue-job"]
    assert extra["id"] == job.id and extra["attempt"] == 3 and extra["max_attempts"] == 3
    assert extra["args"] == extra["kwargs"] == "[Filtered]"


@pytest.mark.usefixtures("eager")
def test_a_retry_that_later_succeeds_is_no_event(sentry: Start, ledger: str) -> None:
    envelopes = sentry()
    job = fail_then_succeed.delay(ledger, "x", 2)
    assert job.status is JobStatus.SUCCEEDED and job.attempts == 3
    assert items(envelopes, "event") == []
    transactions = items(envelopes, "transaction")
    statuses = [t["contexts"]["trace"]["status"] for t in transactions]
    assert statuses == ["internal_error", "internal_error", "ok"]


@pytest.mark.usefixtures("eager")
def test_report_retries_reports_each_failed_attempt_as_a_warning(
    sentry: Start, ledger: str
) -> None:
    envelopes = sentry(report_retries=True)
    fail_then_succeed.delay(ledger, "x", 2)
    events = items(envelopes, "event")
    assert [(e["tags"]["rqueue.attempt"], e["tags"]["rqueue.outcome"]) for e in events] == [
        ("1", "retrying"),
        ("2", "retrying"),
    ]
    assert {e["level"] for e in events} == {"warning"}


@pytest.mark.usefixtures("eager")
def test_reject_and_retry_are_not_errors(sentry: Start, ledger: str) -> None:
    envelopes = sentry(report_retries=True)
    assert rejects.delay(ledger, "r").status is JobStatus.FAILED
    assert retries_itself.delay(ledger, "t", 2, None).status is JobStatus.SUCCEEDED
    assert items(envelopes, "event") == []
    statuses = [t["contexts"]["trace"]["status"] for t in items(envelopes, "transaction")]
    assert statuses == ["aborted", "aborted", "aborted", "ok"]


@pytest.mark.usefixtures("worker_may_close_db_connections")
def test_a_timeout_is_grouped_per_job(sentry: Start, ledger: str) -> None:
    envelopes = sentry()
    sleepy_timeout.delay(ledger, "x", 5)
    run_worker(burst=True)
    [event] = items(envelopes, "event")
    assert event["fingerprint"] == ["rqueue", "JobTimeout", sleepy_timeout.name]


@pytest.mark.usefixtures("eager")
def test_arguments_are_sent_with_send_default_pii_sensitive_ones_hidden(
    sentry: Start, ledger: str
) -> None:
    envelopes = sentry()
    sentry_sdk.get_client().options["send_default_pii"] = True
    log_in.delay(ledger, "ann", password="hunter22")
    [event] = items(envelopes, "event")
    assert event["extra"]["rqueue-job"]["args"] == [ledger, "ann"]
    assert event["extra"]["rqueue-job"]["kwargs"] == {"password": MASK}
    # Nor in the message ("wrong password 'hunter22' for ann"), nor anywhere else.
    [exception] = event["exception"]["values"]
    assert exception["value"] == f"wrong password '{MASK}' for ann"
    assert "hunter22" not in json.dumps(event)


@pytest.mark.usefixtures("worker_may_close_db_connections")
def test_the_attempt_continues_the_trace_of_the_enqueue(
    sentry: Start, rqueue_redis: redis.Redis, ledger: str
) -> None:
    envelopes = sentry()
    with sentry_sdk.start_transaction(op="http.server", name="checkout") as view:
        job = record.delay(ledger, "a")
    trace_id, publish_span = trace_of(job.headers["sentry-trace"])
    assert trace_id == view.trace_id and "sentry-trace_id=" + trace_id in job.headers["baggage"]
    run_worker(burst=True)
    transactions = {t["transaction"]: t for t in items(envelopes, "transaction")}
    [publish] = transactions["checkout"]["spans"]
    assert publish["op"] == "queue.publish" and publish["span_id"] == publish_span
    assert publish["data"]["messaging.destination.name"] == "default"
    assert publish["data"]["messaging.message.id"] == job.id
    process = transactions[record.name]["contexts"]["trace"]
    assert process["op"] == "queue.process"
    assert process["trace_id"] == trace_id and process["parent_span_id"] == publish_span
    assert process["data"]["messaging.system"] == "rqueue"
    assert process["data"]["messaging.message.retry.count"] == 0
    assert 0 <= process["data"]["messaging.message.receive.latency"] < 30_000  # ms


@pytest.mark.usefixtures("worker_may_close_db_connections")
def test_a_failure_outside_any_transaction_still_carries_the_enqueuers_trace(
    sentry: Start, ledger: str
) -> None:
    envelopes = sentry()
    job = fail_always.using(max_attempts=1).delay(ledger, "x")
    trace_id, _ = trace_of(job.headers["sentry-trace"])
    run_worker(burst=True)
    [event] = items(envelopes, "event")
    assert event["contexts"]["trace"]["trace_id"] == trace_id
    assert event["tags"]["rqueue.outcome"] == "failed"


@pytest.mark.usefixtures("worker_may_close_db_connections")
def test_async_jobs_running_together_each_report_in_their_own_scope(
    sentry: Start, ledger: str
) -> None:
    envelopes = sentry()
    failing = {tag: fault_async_flaky.using(max_attempts=1).delay(ledger, tag, 1) for tag in "abc"}
    async_record.delay(ledger, "fine")
    run_worker(burst=True, async_concurrency=4)
    events = items(envelopes, "event")
    assert len(events) == 3
    for event in events:
        [exception] = event["exception"]["values"]
        tag = exception["value"].split()[1]  # "flaky <tag> attempt 1"
        assert event["tags"]["rqueue.job_id"] == failing[tag].id
        assert event["tags"]["rqueue.job"] == fault_async_flaky.name
    assert len(items(envelopes, "transaction")) == 4


@pytest.mark.usefixtures("worker_may_close_db_connections")
def test_the_workers_error_line_is_no_second_event(sentry: Start, ledger: str) -> None:
    envelopes = sentry(defaults=True)  # with sentry-sdk's logging integration
    jobs: list[Job[Any]] = [
        fail_always.using(max_attempts=1).delay(ledger, "sync"),
        fault_async_flaky.using(max_attempts=1).delay(ledger, "async", 1),
    ]
    run_worker(burst=True)
    events = items(envelopes, "event")
    assert sorted(e["tags"]["rqueue.job_id"] for e in events) == sorted(j.id for j in jobs)
    assert all(e.get("logger") is None for e in events), events


@pytest.mark.usefixtures("eager")
def test_nothing_is_done_while_no_client_has_the_integration(sentry: Start, ledger: str) -> None:
    envelopes = sentry()
    sentry_sdk.get_global_scope().set_client(None)
    job = fail_always.delay(ledger, "x")
    assert job.headers == {} and envelopes == []


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"report_retries": 1}, TypeError, "report_retries=...\\) must be a bool"),
        ({"exclude_periodic": "nightly"}, TypeError, "must be a list of regular expressions"),
        ({"exclude_periodic": 3}, TypeError, "must be a list of regular expressions"),
        ({"exclude_periodic": ["a", 1]}, TypeError, "must be a list of regular expressions"),
        ({"exclude_periodic": ["ok", "("]}, ValueError, "'\\(' is not a regular expression"),
    ],
)
def test_the_options_are_checked(
    options: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        RqueueIntegration(**options)


def test_exclude_periodic_takes_any_iterable_of_patterns() -> None:
    options = RqueueIntegration(monitor_periodic=True, exclude_periodic=iter(["night.*"])).options
    assert not options.monitors("nightly") and options.monitors("ping")
    assert options.monitors("a-nightly")  # the whole name must match
