"""A view-only staff user reads no sensitive argument (``@job(sensitive=...)``) on any admin
page of a job that ran on a real (in-process) worker."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis
from django.test import Client

from django_rqueue import get_job
from django_rqueue.engine.keys import QueueKeys
from django_rqueue.sensitive import MASK
from tests.jobs_app.jobs import log_in
from tests.support.inprocess import run_worker

from .conftest import BASE, MakeClient
from .test_pages import job_url

SECRET = "hunter2-SECRET"

pytestmark = pytest.mark.usefixtures("worker_may_close_db_connections")


@pytest.fixture
def viewer(make_client: MakeClient) -> Client:
    return make_client("view_job")


@pytest.mark.parametrize("positional", [False, True], ids=["keyword", "positional"])
def test_a_view_only_user_sees_the_mask_on_the_job_page_and_in_the_failed_list(
    viewer: Client, tmp_path: Path, positional: bool
):
    ledger = str(tmp_path / "ledger.jsonl")
    now = log_in.using(on_commit=False)  # the test runs in a transaction
    if positional:
        failed = now.delay(ledger, "alice", SECRET)
    else:
        failed = now.delay(ledger, "alice", password=SECRET)
    run_worker(burst=True)

    detail = viewer.get(job_url(failed.id))
    listing = viewer.get(f"{BASE}queues/default/failed/")

    assert detail.status_code == listing.status_code == 200
    for page in (detail, listing):
        assert SECRET.encode() not in page.content
    assert b"alice" in detail.content and MASK.encode() in detail.content
    assert f"wrong password &#x27;{MASK}&#x27; for alice".encode() in detail.content


def test_the_raw_fields_of_a_corrupt_record_hide_the_payload(
    viewer: Client, redis_client: redis.Redis
):
    enqueued = log_in.using(on_commit=False).delay("/l", "alice", password=SECRET)
    redis_client.hset(QueueKeys.of("rqueue", "default").job(enqueued.id), "s", "??")
    read = get_job(enqueued.id)
    assert read is not None and read.problems  # the page shows the raw fields

    detail = viewer.get(job_url(enqueued.id))

    assert detail.status_code == 200
    assert b"Corrupt record" in detail.content
    assert SECRET.encode() not in detail.content
