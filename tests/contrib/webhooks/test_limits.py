"""A delivery's bounds against real local servers: only ``MAX_RESPONSE_BYTES`` of a reply's
body are read, and ``timeout`` is a total, wall-clock deadline (a drip cannot stretch it)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from pytest_django.fixtures import Settings as SettingsFixture

from django_rqueue import JobStatus, get_job
from django_rqueue.contrib.webhooks import deliver
from django_rqueue.job import Job
from tests.jobs_app.jobs import sized_deliver, sized_replies
from tests.support.http_server import Reply, http_server
from tests.support.inprocess import run_worker

pytestmark = pytest.mark.usefixtures("worker_may_close_db_connections")

MB = 1024 * 1024


def run(queued: Job[Any]) -> Job[Any]:
    run_worker(burst=True)
    job = get_job(queued.id)
    assert job is not None
    return job


def test_a_huge_reply_is_not_read_past_the_limit() -> None:
    """200 MB offered: the delivery keeps 64 KiB and closes the connection, so the server
    can only write what fits in the sockets' buffers (the former code read it all)."""
    with http_server([Reply(200, size=200 * MB)]) as server:
        done = run(deliver.delay(server.url, {}))
    assert done.status is JobStatus.SUCCEEDED, done.error
    assert server.sent < 32 * MB, f"the server wrote {server.sent / MB:.0f} MB"


@pytest.mark.parametrize(
    ("limit", "size", "headers", "seen"),
    [
        (None, MB, {}, 65_536),  # the default
        (10, 5, {}, 5),
        (0, 100, {}, 0),
        (None, 100, {"Content-Encoding": "gzip"}, 100),  # as received, never decoded
    ],
)
def test_retry_if_sees_at_most_max_response_bytes(
    limit: int | None, size: int, headers: dict[str, str], seen: int, settings: SettingsFixture
) -> None:
    if limit is not None:
        webhooks = {**settings.RQUEUE["WEBHOOKS"], "MAX_RESPONSE_BYTES": limit}
        settings.RQUEUE = {**settings.RQUEUE, "WEBHOOKS": webhooks}
    sized_replies.clear()
    with http_server([Reply(200, headers=headers, size=size)]) as server:
        done = run(sized_deliver.delay(server.url, {}))
    assert done.status is JobStatus.SUCCEEDED, done.error
    assert sized_replies == [seen]
    assert server.requests[0].headers["Accept-Encoding"] == "identity"


def test_a_dripping_reply_fails_at_the_total_timeout() -> None:
    """One byte every 0.3 s for 30 bytes (9 s): each read is quick, the whole is not. The
    attempt must fail at its 1 s deadline (the former per-read timeout let it succeed)."""
    with http_server([Reply(200, size=30, chunk=1, interval=0.3)]) as server:
        queued = deliver.delay(server.url, {}, timeout=1)
        started = time.monotonic()
        done = run(queued)
        took = time.monotonic() - started

    assert done.status is JobStatus.SCHEDULED and done.error is not None  # retries
    assert "no complete response within the total timeout of 1 s" in done.error["message"]
    assert took < 4, f"the attempt took {took:.1f} s"
    assert server.sent < 30
