"""Webhook delivery through an in-process worker against a real local HTTP server that
fails N times, then accepts (tests/support/http_server.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from io import StringIO
from typing import Any

import pytest
import redis
from django.core.management import call_command

from django_rqueue import JobStatus, get_job
from django_rqueue.contrib.webhooks import (
    DeliveryError,
    InvalidDeliveryError,
    deliver,
    verify_signature,
    webhook_job,
)
from django_rqueue.decorators import ContextJobFunction
from django_rqueue.job import Job
from tests.conftest import Event
from tests.jobs_app.jobs import busy_deliver, quick_deliver
from tests.support.http_server import ScriptedServer, http_server
from tests.support.inprocess import run_worker

pytestmark = pytest.mark.usefixtures("worker_may_close_db_connections", "rqueue_redis")


def run_once(queued: Job[Any]) -> Job[Any]:
    """Run the worker until the queue is empty; return the job as it is then."""
    run_worker(burst=True)
    job = get_job(queued.id)
    assert job is not None
    return job


def run_until_done(queued: Job[Any], rounds: int = 12) -> Job[Any]:
    """Run the job's attempts one by one (each retry made due with run_now())."""
    for _ in range(rounds):
        run_worker(burst=True)
        job = get_job(queued.id)
        assert job is not None
        if job.status is not JobStatus.SCHEDULED:
            return job
        job.run_now()
    raise AssertionError(f"{queued.id} still retrying after {rounds} rounds")


def retrying_delays(events: list[Event]) -> list[float]:
    return [kw["delay"] for name, _, kw in events if name == "job_retrying"]


def test_the_builtin_job_is_registered_and_retries_after_1_3_5_7_minutes() -> None:
    assert deliver.name == "django_rqueue.contrib.webhooks.deliver"
    assert (deliver.options.backoff, deliver.options.max_attempts) == ("odd_minutes", 10)


def test_fails_twice_then_accepts_retrying_after_1_then_3_minutes(events: list[Event]) -> None:
    with http_server([(503, {}), (500, {}), (204, {})]) as server:
        queued = deliver.delay(f"{server.url}/hooks", {"order": 42}, headers={"X-Shop": "a"})
        done = run_until_done(queued)

    assert done.status is JobStatus.SUCCEEDED and done.attempts == 3
    assert done.result is not None and done.result["status"] == 204
    assert done.result["elapsed_ms"] >= 0
    assert retrying_delays(events) == [60.0, 180.0]
    assert len(server.requests) == 3
    for attempt, received in enumerate(server.requests, start=1):
        assert (received.method, received.path) == ("POST", "/hooks")
        assert json.loads(received.body) == {"order": 42}
        assert received.headers["Content-Type"] == "application/json"
        assert received.headers["X-Rqueue-Delivery"] == queued.id
        assert received.headers["X-Rqueue-Attempt"] == str(attempt)
        assert received.headers["X-Shop"] == "a"
        assert "X-Rqueue-Signature" not in received.headers


def test_url_and_payload_may_be_keyword_arguments(server_ok: ScriptedServer) -> None:
    done = run_until_done(deliver.delay(url=server_ok.url, payload={"order": 7}))
    assert done.status is JobStatus.SUCCEEDED
    assert json.loads(server_ok.requests[-1].body) == {"order": 7}
    (queued,) = deliver.delay_many([((), {"url": server_ok.url, "payload": [1]})])
    assert run_until_done(queued).status is JobStatus.SUCCEEDED


def test_with_a_secret_every_attempt_is_signed_with_its_id_and_attempt_in_the_body() -> None:
    with http_server([(500, {}), (200, {})]) as server:
        queued = quick_deliver.delay(server.url, [1, "two"], secret=["s3cret", "old"])
        done = run_until_done(queued)

    assert done.status is JobStatus.SUCCEEDED
    for attempt, received in enumerate(server.requests, start=1):
        header = received.headers["X-Rqueue-Signature"]
        assert verify_signature("s3cret", received.body, header) > 0
        assert verify_signature("old", received.body, header) > 0
        envelope = {"id": queued.id, "attempt": attempt, "data": [1, "two"]}
        assert json.loads(received.body) == envelope


@pytest.mark.parametrize("status", [408, 429, 500, 502])
def test_retried_statuses(status: int, events: list[Event]) -> None:
    with http_server([(status, {}), (200, {})]) as server:
        done = run_until_done(quick_deliver.delay(server.url, {}))
    assert done.status is JobStatus.SUCCEEDED and done.attempts == 2
    assert len(server.requests) == 2


@pytest.mark.parametrize("status", [301, 400, 401, 404, 410, 422])
def test_other_statuses_fail_at_once(status: int, events: list[Event]) -> None:
    with http_server([(status, {}), (200, {})]) as server:
        done = run_until_done(quick_deliver.delay(server.url, {}))
    assert done.status is JobStatus.FAILED and done.attempts == 1
    assert done.error is not None and done.error["type"] == "django_rqueue.exceptions.Reject"
    assert f"HTTP {status}, not retried" in done.error["message"]
    assert len(server.requests) == 1 and retrying_delays(events) == []


def test_all_attempts_failing_ends_in_the_failed_store() -> None:
    with http_server([(500, {})]) as server:
        done = run_until_done(quick_deliver.delay(server.url, {}))
    assert done.status is JobStatus.FAILED and done.attempts == 4
    assert len(server.requests) == 4
    assert done.error is not None
    assert done.error["type"] == DeliveryError.__module__ + ".DeliveryError"
    assert "HTTP 500" in done.error["message"]


def test_a_password_in_the_url_stays_out_of_the_error() -> None:
    with http_server([(500, {})]) as server:
        url = server.url.replace("http://", "http://user:pa55word@") + "/hooks?x=1"
        after = run_once(deliver.delay(url, {}))
    assert after.status is JobStatus.SCHEDULED and after.error is not None
    assert f"POST {server.url}/hooks?x=1: HTTP 500" in after.error["message"]
    assert "pa55word" not in after.error["message"] and "user" not in after.error["message"]
    assert server.requests[0].headers["Authorization"].startswith("Basic ")


def test_a_connection_error_retries(unused_url: str) -> None:
    after = run_once(deliver.delay(unused_url, {}))
    assert after.status is JobStatus.SCHEDULED and after.attempts == 1
    assert after.error is not None and after.error["type"].endswith("DeliveryError")
    assert "ConnectError" in after.error["message"]


def test_retry_after_sets_the_delay(events: list[Event]) -> None:
    script = [(429, {"Retry-After": "7"}), (503, {"Retry-After": "99999"}), (200, {})]
    with http_server(script) as server:
        done = run_until_done(quick_deliver.delay(server.url, {}))
    assert done.status is JobStatus.SUCCEEDED and done.attempts == 3
    assert retrying_delays(events) == [7.0, 3600.0]


def test_a_retry_condition_on_the_response_replaces_the_status_rule() -> None:
    busy = {"X-Status": "busy"}
    with http_server([(200, busy), (200, busy), (200, {})]) as server:
        queued = busy_deliver.delay(server.url, {"n": 1})
        first = run_once(queued)  # a 200 the condition retries: 1 minute (odd_minutes)
        assert first.status is JobStatus.SCHEDULED and first.attempts == 1
        done = run_until_done(queued)
    assert done.status is JobStatus.SUCCEEDED and done.attempts == 3
    with http_server([(500, {})]) as server:
        failed = run_until_done(busy_deliver.delay(server.url, {}))
    assert failed.status is JobStatus.FAILED and failed.attempts == 1


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (("ftp://example.com", {}), {}, "absolute http"),
        (("/relative", {}), {}, "absolute http"),
        ((42, {}), {}, "absolute http"),
        (("http://example.com", {}), {"headers": {"X": 1}}, "headers"),
        (("http://example.com", {}), {"headers": ["X"]}, "headers"),
        (("http://example.com", {}), {"headers": {"X": "v\r\nX-Injected: 1"}}, "header 'X'"),
        (("http://example.com", {}), {"headers": {"X": "v\n"}}, "header 'X'"),
        (("http://example.com", {}), {"headers": {"X": "v\x00"}}, "header 'X'"),
        (("http://example.com", {}), {"headers": {"Bad Name": "v"}}, "'Bad Name' is not"),
        (("http://example.com", {}), {"headers": {"X:Y": "v"}}, "'X:Y' is not"),
        (("http://example.com", {}), {"headers": {"": "v"}}, "'' is not"),
        (("http://example.com", {}), {"headers": {"X-Rqueue-Delivery": "f"}}, "by the delivery"),
        (("http://example.com", {}), {"headers": {"x-rqueue-signature": "f"}}, "by the delivery"),
        (("http://example.com", {}), {"headers": {"X-RQUEUE-whatever": "f"}}, "by the delivery"),
        (("http://example.com", {}), {"headers": {"content-type": "text/plain"}}, "by the"),
        (("http://example.com", {}), {"headers": {"Host": "internal"}}, "by the delivery"),
        (("http://example.com", {}), {"headers": {"User-Agent": "x"}}, "by the delivery"),
        (("http://example.com", {}), {"secret": ""}, "secret"),
        (("http://example.com", {}), {"timeout": 0}, "timeout"),
        (("http://example.com", {}), {"timeout": True}, "timeout"),
        (("http://example.com", {}), {"method": "GET"}, "method"),
        (("http://example.com", {}), {"retries": 3}, "unknown delivery options: retries"),
    ],
)
def test_bad_deliveries_are_refused_before_anything_is_written(
    args: tuple[object, ...], kwargs: dict[str, object], match: str, rqueue_redis: redis.Redis
) -> None:
    with pytest.raises(InvalidDeliveryError, match=match):
        deliver.delay(*args, **kwargs)
    with pytest.raises(InvalidDeliveryError, match=f"call 1: .*{match}"):
        deliver.delay_many([(("http://example.com", {}), {}), (args, kwargs)])
    with pytest.raises(TypeError, match="takes \\(url, payload\\)"):
        deliver.delay("http://example.com")
    assert rqueue_redis.dbsize() == 0


def test_a_tab_in_a_header_value_is_allowed(server_ok: ScriptedServer) -> None:
    done = run_until_done(deliver.delay(server_ok.url, {}, headers={"X-Tabbed": "a\tb"}))
    assert done.status is JobStatus.SUCCEEDED
    assert server_ok.requests[0].headers["X-Tabbed"] == "a\tb"


def test_the_delivery_s_headers_win_over_reserved_ones_of_a_job_enqueued_unchecked(
    server_ok: ScriptedServer,
) -> None:
    forged = {
        "X-Rqueue-Delivery": "forged-id",
        "X-Rqueue-Attempt": "99",
        "Content-Type": "text/plain",
        "x-rqueue-signature": "t=1,v1=forged",
        "X-Shop": "eu",
    }
    # as a job written before .delay() refused these names (or by hand in Redis)
    queued = ContextJobFunction.delay(deliver, server_ok.url, {}, headers=forged, secret="k")
    assert run_until_done(queued).status is JobStatus.SUCCEEDED

    [received] = server_ok.requests
    names = [name.lower() for name, _ in received.raw_headers]
    assert len(names) == len(set(names))  # no header twice, whatever its case
    assert received.headers["X-Rqueue-Delivery"] == queued.id
    assert received.headers["X-Rqueue-Attempt"] == "1"
    assert received.headers["Content-Type"] == "application/json"
    assert received.headers["X-Shop"] == "eu"
    assert verify_signature("k", received.body, received.headers["X-Rqueue-Signature"]) > 0


def test_a_job_enqueued_unchecked_with_a_broken_header_fails_at_once(
    server_ok: ScriptedServer,
) -> None:
    headers = {"X-Shop": "v\r\nX-Injected: 1"}
    queued = ContextJobFunction.delay(deliver, server_ok.url, {}, headers=headers)
    done = run_once(queued)
    assert done.status is JobStatus.FAILED and done.attempts == 1 and done.error is not None
    assert "header 'X-Shop': its value holds a control character" in done.error["message"]
    assert server_ok.requests == []


def test_webhook_job_checks_its_options() -> None:
    with pytest.raises(ValueError, match="retry_if must be a callable"):
        webhook_job(name="tests.bad", retry_if="status >= 500")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_attempts"):
        webhook_job(name="tests.bad", max_attempts=0)


@pytest.fixture
def server_ok() -> Iterator[ScriptedServer]:
    with http_server([(200, {})]) as server:
        yield server


@pytest.fixture
def unused_url() -> str:
    with http_server([(200, {})]) as server:
        url = server.url
    return url  # nothing listens there any more


def test_a_delivery_s_secret_and_headers_are_hidden_from_people() -> None:
    with http_server([(400, {})]) as server:  # a 4xx: failed at once
        queued = deliver.delay(
            f"{server.url}/hooks",
            {"order": 1},
            headers={"Authorization": "Bearer t0ken-x"},
            secret="s3cret-value",
        )
        done = run_once(queued)
    assert done.status is JobStatus.FAILED
    assert server.requests[0].headers["Authorization"] == "Bearer t0ken-x"  # the job got them
    out = StringIO()
    call_command("rqueue_failed", "show", done.id, stdout=out)
    shown = out.getvalue()
    assert "********" in shown
    assert "s3cret-value" not in shown and "t0ken-x" not in shown, shown
