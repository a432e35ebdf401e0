"""SIGTERM while a job outlasts ``--shutdown-timeout``: it is handed back unspent and runs once.

The master gives the running job ``--shutdown-timeout`` seconds, then kills
the child and hands the job back to its queue without spending an attempt
(``release.lua``: attempts back down, no error recorded, token bumped so the
killed run could not report anyway), and exits 0. The next worker runs the
job once, as its first attempt.
"""

from __future__ import annotations

import signal
import time

import pytest

from django_rqueue import JobStatus, get_job
from django_rqueue.conf import get_config
from django_rqueue.engine.keys import QueueKeys
from tests.jobs_app.jobs import fault_sleep

from .harness import Faults, alive, job_hash


@pytest.mark.slow
def test_sigterm_hands_a_long_job_back_without_spending_an_attempt(faults: Faults) -> None:
    worker = faults.worker("--queues", "default", "--concurrency", "1", "--shutdown-timeout", "1")
    faults.wait_ready(worker)
    job = fault_sleep.delay(faults.ledger, "long", 5)
    first = faults.wait_event("start", tag="long")
    assert first["attempt"] == 1

    signalled = time.monotonic()
    worker.signal(signal.SIGTERM)
    assert worker.wait(timeout=6) == 0
    took = time.monotonic() - signalled
    print(f"SIGTERM -> exit 0 in {took:.2f} s (--shutdown-timeout 1, job needed 5 s)")
    assert 0.9 <= took < 4.5
    assert not alive(first["pid"]), "the child outlived its master"
    assert faults.events("end", tag="long") == [], "the job was not interrupted"

    handed_back = get_job(job.id)
    assert handed_back is not None
    assert handed_back.status is JobStatus.QUEUED
    assert handed_back.attempts == 0, "the interrupted attempt was spent"
    assert handed_back.error is None and handed_back.errors == []
    assert handed_back.token > first["token"]  # the killed run's token is stale now
    fields = job_hash(faults.client, job.id)
    assert "worker" not in fields and int(fields.get("nerr", 0)) == 0
    assert faults.client.zcard(QueueKeys.of(get_config().key_prefix, "default").reserved) == 0
    assert "handed" in worker.stderr() and job.id in worker.stderr()

    successor = faults.worker("--queues", "default", "--concurrency", "1")
    report = faults.wait_and_check([job.id], timeout=30)
    assert report.states[job.id] == "succeeded"
    assert report.starts[job.id] == 2  # the interrupted run and the complete one
    assert len(faults.events("end", tag="long")) == 1
    second = faults.events("start", tag="long")[1]
    assert second["attempt"] == 1 and second["pid"] in successor.children()
    assert report.jobs[job.id]["attempts"] == "1"
    assert report.errors(job.id) == []
