"""The outcomes of async jobs are reported in batches (worker.async_reports,
worker.reporting.deliver_batch): the jobs that end together share one thread hop and one
round trip, each keeps its own verdict, and ``close_old_connections()`` runs once for the
jobs that end together, not once per job."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import redis
from django.db import close_old_connections

from django_rqueue import JobStatus
from django_rqueue.execution import AttemptResult, failure
from django_rqueue.job import Job
from django_rqueue.worker.hooks import AttemptOutcome
from django_rqueue.worker.reporting import deliver_batch
from tests.jobs_app.jobs import fault_async_flaky, fault_async_gate, record
from tests.support import transitions
from tests.support.inprocess import keys, run_worker

pytestmark = pytest.mark.usefixtures("worker_may_close_db_connections")


def test_async_jobs_that_end_together_are_reported_in_fewer_batches_than_jobs(
    ledger: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    batches: list[int] = []
    real = deliver_batch

    def noting(reports: Sequence[Any]) -> list[AttemptOutcome]:
        batches.append(len(reports))
        return real(reports)

    monkeypatch.setattr("django_rqueue.worker.async_reports.deliver_batch", noting)
    gate = tmp_path / "gate"
    gate.touch()  # open from the start: the jobs end as soon as they start
    jobs = [fault_async_gate.delay(ledger, f"j{n}", str(gate)) for n in range(30)]
    flaky = fault_async_flaky.delay(ledger, "flaky", 5)  # its first attempt fails

    worker = run_worker(burst=True, async_concurrency=31)

    assert worker.processed == 31
    assert sum(batches) == 31 and len(batches) < 31 and max(batches) > 1
    for job in jobs:
        job.refresh()
        assert (job.status, job.attempts, job.result) == (JobStatus.SUCCEEDED, 1, job.args[1])
    flaky.refresh()
    assert (flaky.status, flaky.attempts) == (JobStatus.SCHEDULED, 1)


def test_a_batch_gives_each_report_its_own_verdict(ledger: str, rqueue_redis: redis.Redis) -> None:
    """An ack, a stale ack (its lease was taken over), a failure with a retry and a final
    failure, in one batch: each is applied or refused on its own."""
    for tag in "abcd":
        record.delay(ledger, tag)
    held = []
    for _ in range(4):
        reserved = transitions.reserve(rqueue_redis, keys(), lease_ms=60_000, worker_id="w")
        assert reserved is not None
        held.append(Job.from_fields(*reserved))
    stale = held[1]
    transitions.release(rqueue_redis, keys(), stale.id, stale.token)  # handed back, and
    again = transitions.reserve(rqueue_redis, keys(), lease_ms=60_000, worker_id="other")
    assert again is not None and again[0] == stale.id  # taken by another worker
    ok = AttemptResult(result_json='"fine"')
    boom = failure(ValueError("boom"))

    outcomes = deliver_batch(
        [
            ("default", held[0], ok, None),
            ("default", stale, ok, None),
            ("default", held[2], boom, 5.0),
            ("default", held[3], boom, None),
        ]
    )

    assert outcomes == [
        AttemptOutcome.SUCCEEDED,
        AttemptOutcome.DISCARDED,
        AttemptOutcome.RETRYING,
        AttemptOutcome.FAILED,
    ]
    states = [transitions.read_job(rqueue_redis, keys(), j.id)[b"s"] for j in held]
    assert states == [b"succeeded", b"running", b"scheduled", b"failed"]


def test_close_old_connections_runs_once_for_jobs_that_end_together(
    ledger: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """20 async jobs end together: the ORM's thread is housekept a few times (the
    session's start and end, and the batches the loop saw), not 20 times, and never in
    the event loop's thread."""
    calls: list[int] = []
    real = close_old_connections

    def counting() -> None:
        calls.append(threading.get_ident())
        real()

    monkeypatch.setattr("django_rqueue.worker.async_runner.close_old_connections", counting)
    gate = tmp_path / "gate"
    gate.touch()
    jobs = [fault_async_gate.delay(ledger, f"j{n}", str(gate)) for n in range(20)]

    worker = run_worker(burst=True, async_concurrency=20)

    assert worker.processed == 20
    for job in jobs:
        job.refresh()
        assert job.status is JobStatus.SUCCEEDED
    assert 2 <= len(calls) < 20
    assert threading.get_ident() not in calls
