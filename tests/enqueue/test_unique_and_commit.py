"""``.delay()``'s unique keys, and its writes inside ``transaction.atomic()``: deferred to
the commit, dropped by a rollback, and the unique keys held meanwhile (the package's own
record of the pending jobs, django_rqueue.enqueue.commit)."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from django.db import transaction

from django_rqueue import (
    Job,
    JobStatus,
    get_job,
    job,
)
from django_rqueue.engine.keys import QueueKeys
from tests.enqueue.jobs import bare, job_hash, job_ids, work_one
from tests.support import transitions
from tests.support.waiting import wait_until

KEYS = QueueKeys.of("rqueue", "default")


pytestmark = pytest.mark.usefixtures("worker_may_close_db_connections")


@job(unique_key=lambda user_id: f"report:{user_id}")
def report(user_id: int) -> None:
    return None


@job(max_attempts=1)
def explode() -> None:
    raise RuntimeError("boom")


# -- unique keys ---------------------------------------------------------------------------


def _holder_in(state: str, client: redis.Redis) -> str:
    if state == "scheduled":
        return report.using(delay=3600).delay(7).id
    holder = report.delay(7).id
    if state == "running":
        got = transitions.reserve(client, KEYS, lease_ms=60_000, worker_id="w")
        assert got is not None
        assert got[0] == holder
    return holder


@pytest.mark.parametrize("state", ["scheduled", "queued", "running"])
def test_a_duplicate_returns_the_pending_job_and_enqueues_nothing(
    state: str, redis_client: redis.Redis
):
    holder = _holder_in(state, redis_client)
    ids = job_ids(redis_client)
    queued_before = redis_client.hget(KEYS.stats, "queued")
    again = report.delay(7)
    assert again.id == holder
    assert again.status == state
    assert job_ids(redis_client) == ids
    assert redis_client.hget(KEYS.stats, "queued") == queued_before
    assert report.delay(8).id != holder  # another key is another job


def _finish(how: str, job_id: str, client: redis.Redis) -> None:
    got = get_job(job_id)
    assert got is not None
    if how == "cancelled":
        got.cancel()
    elif how == "succeeded":
        work_one()
    else:  # failed: make it fail its only attempt
        got.delete()
        failing = explode.using(unique_key="report:7").delay()
        work_one()
        failing.refresh()
        assert failing.status is JobStatus.FAILED


@pytest.mark.parametrize("how", ["succeeded", "failed", "cancelled"])
def test_a_unique_key_is_accepted_again_once_its_job_is_done(how: str, redis_client: redis.Redis):
    first = report.delay(7)
    _finish(how, first.id, redis_client)
    second = report.delay(7)
    assert second.id != first.id
    assert second.status is JobStatus.QUEUED
    assert job_hash(redis_client, second.id)["uk"] == "report:7"


def test_a_unique_ttl_releases_the_key_after_it_expires(redis_client: redis.Redis):
    first = report.using(unique_ttl=1).delay(7)
    assert report.delay(7).id == first.id

    def a_new_job() -> Job[Any] | None:
        candidate = report.delay(7)
        return candidate if candidate.id != first.id else None

    again = wait_until(a_new_job, timeout=5, message="TTL expiry")
    assert again is not None
    assert again.status is JobStatus.QUEUED
    assert get_job(first.id) is not None  # the first job is still there


# -- transactions -----------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_inside_atomic_nothing_is_written_until_commit(redis_client: redis.Redis):
    with transaction.atomic():
        queued = bare.delay(1)
        scheduled = bare.using(delay=60).delay(2)
        unique = report.delay(3)
        assert redis_client.dbsize() == 0
        assert get_job(queued.id) is None
    ids = job_ids(redis_client)
    assert ids == {queued.id, scheduled.id, unique.id}  # the returned ids are the final ones
    assert get_job(queued.id).status is JobStatus.QUEUED  # type: ignore[union-attr]
    assert get_job(scheduled.id).status is JobStatus.SCHEDULED  # type: ignore[union-attr]
    assert redis_client.get(KEYS.unique("report:3")) == unique.id.encode()


@pytest.mark.django_db(transaction=True)
def test_a_rollback_writes_nothing(redis_client: redis.Redis):
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        bare.delay(1)
        bare.using(delay=60).delay(2)
        report.delay(3)
        raise ZeroDivisionError
    assert redis_client.dbsize() == 0


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_savepoint_drops_only_its_jobs(redis_client: redis.Redis):
    with transaction.atomic():
        kept = bare.delay(1)
        with pytest.raises(ZeroDivisionError), transaction.atomic():
            bare.delay(2)
            raise ZeroDivisionError
    assert job_ids(redis_client) == {kept.id}


@pytest.mark.django_db(transaction=True)
def test_on_commit_false_writes_at_once(redis_client: redis.Redis):
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        now = bare.using(on_commit=False).delay(1)
        assert get_job(now.id) is not None
        raise ZeroDivisionError
    assert job_ids(redis_client) == {now.id}


@pytest.mark.django_db(transaction=True)
def test_a_unique_duplicate_inside_atomic_returns_the_pending_job(redis_client: redis.Redis):
    holder = report.delay(3)
    with transaction.atomic():
        again = report.delay(3)
        assert again.id == holder.id
    assert job_ids(redis_client) == {holder.id}


@pytest.mark.django_db(transaction=True)
def test_two_delays_of_one_unique_key_in_one_transaction_give_one_job(redis_client: redis.Redis):
    with transaction.atomic():
        first = report.delay(4)
        second = report.delay(4)
        assert second.id == first.id  # the id a caller may store in the same transaction
    assert job_ids(redis_client) == {first.id}
    assert second.id == first.id


@pytest.mark.django_db(transaction=True)
def test_a_unique_key_taken_before_commit_gives_the_holders_id(redis_client: redis.Redis):
    with transaction.atomic():
        pending = report.delay(5)
        holder = report.using(on_commit=False).delay(5)  # e.g. another process, meanwhile
        assert holder.id != pending.id
    assert job_ids(redis_client) == {holder.id}
    assert pending.id == holder.id  # after commit the returned Job is the one in Redis
    assert pending.status is JobStatus.QUEUED


@pytest.mark.django_db(transaction=True)
def test_a_unique_job_dropped_with_its_savepoint_does_not_block_the_key(redis_client: redis.Redis):
    with transaction.atomic():
        with pytest.raises(ZeroDivisionError), transaction.atomic():
            dropped = report.delay(6)
            raise ZeroDivisionError
        kept = report.delay(6)
        assert kept.id != dropped.id
    assert job_ids(redis_client) == {kept.id}
