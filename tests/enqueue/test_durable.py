"""Durable enqueue (RQUEUE["MIN_REPLICAS_ACK"]): .delay(), .adelay(), .delay_many() and the
django.tasks backend return once the replicas have the job (WAIT on the write's connection),
and raise NotReplicated, the job written to the master, when they do not confirm it in time.

A real master and its replica (SentinelSet(sentinels=0)); the failover scenarios are in
tests/faults/test_sentinel_failover.py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.db import transaction
from pytest_django.fixtures import Settings

from django_rqueue import NotReplicated, job
from django_rqueue.engine.keys import QueueKeys
from tests.jobs_app.tasks import record_task
from tests.support.redis_sentinel import SentinelSet

KEYS = QueueKeys.of("rqueue", "default")
#: MIN_REPLICAS_TIMEOUT of these tests, in seconds.
TIMEOUT = 0.3


@job
def durable_noop(n: int) -> None:
    return None


@job(unique_key=lambda n: f"durable:{n}")
def durable_unique(n: int) -> None:
    return None


@pytest.fixture
def replicated(settings: Settings) -> Iterator[SentinelSet]:
    """A master and its replica; RQUEUE points at the master with MIN_REPLICAS_ACK 1."""
    with SentinelSet(sentinels=0).start() as pair:
        settings.RQUEUE = {
            **settings.RQUEUE,
            "REDIS_URL": pair.master.url,
            "MIN_REPLICAS_ACK": 1,
            "MIN_REPLICAS_TIMEOUT": TIMEOUT,
        }
        yield pair


def _replica(pair: SentinelSet) -> redis.Redis:
    assert pair.replica is not None
    return pair.replica.client()


def _stop_replica(pair: SentinelSet) -> None:
    assert pair.replica is not None
    pair.replica.stop()
    with pair.master.client() as master:
        assert master.info("replication")["connected_slaves"] == 0


def test_delay_returns_once_the_replica_has_the_job(replicated: SentinelSet):
    replica = _replica(replicated)
    for n in range(20):
        queued = durable_noop.delay(n)
        assert replica.exists(KEYS.job(queued.id))  # at once: WAIT confirmed it


def test_delay_many_waits_for_every_batch(replicated: SentinelSet):
    jobs = durable_noop.delay_many((((n,), {}) for n in range(25)), batch_size=10)
    replica = _replica(replicated)
    pipe = replica.pipeline(transaction=False)
    for queued in jobs:
        pipe.exists(KEYS.job(queued.id))
    assert pipe.execute() == [1] * 25


def test_adelay_and_the_tasks_backend_wait_too(replicated: SentinelSet, tmp_path: Path):
    replica = _replica(replicated)
    queued = asyncio.run(durable_noop.adelay(1))
    assert replica.exists(KEYS.job(queued.id))
    result = record_task.enqueue(str(tmp_path / "ledger"), "t")
    assert replica.exists(QueueKeys.of("rqueue", record_task.queue_name).job(result.id))
    # Its result is complete (the write is not overlapped with it when it waits).
    assert result.enqueued_at is not None and record_task.get_result(result.id) == result


def test_delay_raises_not_replicated_within_the_timeout_when_no_replica_confirms(
    replicated: SentinelSet, events: list[Any]
):
    _stop_replica(replicated)
    started = time.monotonic()
    with pytest.raises(NotReplicated) as caught:
        durable_noop.delay(7)
    elapsed = time.monotonic() - started
    assert TIMEOUT <= elapsed < TIMEOUT + 1.0
    error = caught.value
    (job_id,) = error.job_ids
    assert (error.acked, error.required, error.timeout) == (0, 1, TIMEOUT)
    assert job_id in str(error)
    assert "MIN_REPLICAS_ACK" in str(error)
    with replicated.master.client() as master:
        assert master.hget(KEYS.job(job_id), "s") == b"queued"  # written to the master
    assert [(name, kw["job"].id) for name, _, kw in events] == [("job_enqueued", job_id)]


def test_adelay_raises_not_replicated_too(replicated: SentinelSet):
    _stop_replica(replicated)
    with pytest.raises(NotReplicated) as caught:
        asyncio.run(durable_noop.adelay(7))
    assert len(caught.value.job_ids) == 1


def test_delay_many_stops_at_the_first_batch_not_confirmed(replicated: SentinelSet):
    _stop_replica(replicated)
    calls: list[tuple[tuple[int], dict[str, Any]]] = [((n,), {}) for n in range(5)]
    with replicated.master.client() as master:
        with pytest.raises(NotReplicated) as caught:
            durable_noop.delay_many(calls, batch_size=2)
        written = caught.value.job_ids
        assert len(written) == 2  # the first batch; the others were not written
        assert all(master.exists(KEYS.job(job_id)) for job_id in written)
        assert master.zcard(KEYS.prios) == 1
        assert sum(1 for _ in master.scan_iter(match=KEYS.job("*"))) == 2


def test_a_duplicate_unique_key_writes_nothing_and_raises_nothing(replicated: SentinelSet):
    first = durable_unique.delay(1)
    _stop_replica(replicated)
    again = durable_unique.delay(1)
    assert again.id == first.id


@pytest.mark.django_db(transaction=True)
def test_inside_atomic_it_is_raised_by_the_commit_after_it(replicated: SentinelSet):
    from django.contrib.auth.models import Group

    _stop_replica(replicated)
    with pytest.raises(NotReplicated):
        with transaction.atomic():
            Group.objects.create(name="committed")
            queued = durable_noop.delay(1)
    assert Group.objects.filter(name="committed").exists()  # the commit happened first
    with replicated.master.client() as master:
        assert master.exists(KEYS.job(queued.id))
