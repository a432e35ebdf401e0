"""``adelay()`` from async code on a real redis-server: the write, its checks, a unique key,
a transaction's commit, an async view."""

from __future__ import annotations

import asyncio

import pytest
import redis
from asgiref.sync import async_to_sync
from django.db import transaction
from django.test import AsyncClient

from django_rqueue import JobStatus, get_job
from django_rqueue.worker.loop import Worker
from tests.enqueue.jobs import add, digest, job_ids
from tests.jobs_app.jobs import read_ledger

pytestmark = pytest.mark.usefixtures("worker_may_close_db_connections")


def test_adelay_writes_the_job_like_delay_and_announces_it(
    redis_client: redis.Redis, enqueued: list[str]
):
    queued = asyncio.run(add.using(priority=5).adelay(2, y=3))

    assert queued.status is JobStatus.QUEUED and queued.priority == 5
    stored = get_job(queued.id)
    assert stored is not None
    assert (stored.status, stored.args, stored.kwargs, stored.priority) == (
        JobStatus.QUEUED,
        [2],
        {"y": 3},
        5,
    )
    assert enqueued == [queued.id]
    Worker(["default"], burst=True, with_poller=False).run()
    assert get_job(queued.id).result == 5  # type: ignore[union-attr]


def test_adelay_checks_its_arguments_before_writing(redis_client: redis.Redis):
    with pytest.raises(TypeError, match="'x'"):
        asyncio.run(add.adelay(object()))  # type: ignore[arg-type]
    assert redis_client.dbsize() == 0


def test_adelay_of_a_held_unique_key_returns_the_holder(redis_client: redis.Redis):
    holder = digest.delay(7)
    again = asyncio.run(digest.adelay(7))
    assert again.id == holder.id and again.status is JobStatus.QUEUED


@pytest.mark.django_db(transaction=True)
def test_adelay_called_inside_a_transaction_waits_for_its_commit(
    redis_client: redis.Redis, enqueued: list[str]
):
    """async_to_sync inside atomic(): the transaction is the calling thread's, and adelay
    asks that thread (through sync_to_async) whether it must wait for the commit."""
    with transaction.atomic():
        pending = async_to_sync(add.adelay)(1, 2)
        assert redis_client.dbsize() == 0 and enqueued == []
    assert job_ids(redis_client) == {pending.id}
    assert enqueued == [pending.id]
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        async_to_sync(add.adelay)(3, 4)
        raise ZeroDivisionError
    assert len(job_ids(redis_client)) == 1


def test_an_async_view_enqueues_with_adelay(redis_client: redis.Redis, ledger: str):
    response = async_to_sync(AsyncClient().get)(
        "/enqueue-async/", {"ledger": ledger, "tag": "from-view"}
    )

    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "queued"
    Worker(["default"], burst=True, with_poller=False).run()
    assert [e["tag"] for e in read_ledger(ledger)] == ["from-view"]
    assert get_job(body["id"]).status is JobStatus.SUCCEEDED  # type: ignore[union-attr]
