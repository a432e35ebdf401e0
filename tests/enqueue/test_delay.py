"""``.delay()`` on a real redis-server: the payload limit and a caller-chosen job id. The
decorator's options and the rest of a single ``delay()`` are in tests/test_decorators.py."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from asgiref.sync import async_to_sync
from pytest_django.fixtures import Settings

from django_rqueue import JobStatus, get_job
from tests.enqueue.jobs import carry, job_ids

pytestmark = pytest.mark.usefixtures("worker_may_close_db_connections")


def test_arguments_larger_than_max_payload_bytes_raise_and_write_nothing(
    redis_client: redis.Redis, settings: Settings
):
    settings.RQUEUE = {**settings.RQUEUE, "MAX_PAYLOAD_BYTES": 100}
    fits = carry.delay("x" * 90)  # ["xxx…"]: 94 bytes
    with pytest.raises(ValueError, match=r"take 204 bytes as JSON, more than .*\(100\)"):
        carry.delay("y" * 200)
    with pytest.raises(ValueError, match=r"^call 1: .* take 204 bytes"):
        carry.delay_many([(("z",), {}), (("y" * 200,), {})])
    with pytest.raises(ValueError, match="take 204 bytes"):
        async_to_sync(carry.adelay)("y" * 200)
    assert job_ids(redis_client) == {fits.id}


def test_the_payload_limit_is_one_mib_by_default_and_none_lifts_it(
    redis_client: redis.Redis, settings: Settings
):
    with pytest.raises(ValueError, match=r"more than RQUEUE\['MAX_PAYLOAD_BYTES'\] \(1048576\)"):
        carry.delay("y" * 1_048_576)
    settings.RQUEUE = {**settings.RQUEUE, "MAX_PAYLOAD_BYTES": None}
    big = carry.delay("y" * 1_048_576)
    assert job_ids(redis_client) == {big.id}
    # ... up to the 64 MiB of JSON a worker decodes (serialization.MAX_JSON_BYTES).
    with pytest.raises(ValueError, match=r"more than RQUEUE\['MAX_PAYLOAD_BYTES'\] \(67108864\)"):
        carry.delay("y" * 64 * 1024 * 1024)
    assert job_ids(redis_client) == {big.id}


def test_a_caller_chosen_job_id_makes_a_retried_enqueue_write_nothing(
    redis_client: redis.Redis, enqueued: list[str]
):
    first = carry.using(job_id="order-42.receipt").delay("first")
    assert first.id == "default:order-42.receipt"
    again = carry.using(job_id="order-42.receipt").delay("second")  # the caller's retry
    assert again.id == first.id and again.args == ["first"]  # the job already there
    assert again.status is JobStatus.QUEUED
    assert job_ids(redis_client) == {first.id}
    assert enqueued == [first.id]  # job_enqueued once
    stored = get_job(first.id)
    assert stored is not None and stored.args == ["first"]
    other_queue = carry.using(job_id="order-42.receipt", queue="emails").delay("x")
    assert other_queue.id == "emails:order-42.receipt"
    again_async = async_to_sync(carry.using(job_id="order-42.receipt").adelay)("third")
    assert again_async.id == first.id and again_async.args == ["first"]


@pytest.mark.parametrize("bad", ["", "a b", "x" * 129, "brace{tag}", 42])
def test_a_bad_job_id_is_refused_naming_the_rule(bad: Any):
    with pytest.raises(ValueError, match="job_id must be 1 to 128 of the characters"):
        carry.using(job_id=bad)
