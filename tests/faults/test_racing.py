"""Five pollers and three workers race over 10 000 jobs due at once: each promoted once, run once.

All 10 000 no-op jobs are scheduled for the same instant, a moment after
five ``rqueue_poller`` processes and three ``rqueue_work --without-poller``
supervisors are up and idle. When they fall due the pollers compete to
promote them (every promotion is one atomic script moving up to 500 jobs)
and the workers compete to reserve them. Each job must be promoted exactly
once (the pollers' own counts add up to 10 000) and run exactly once (the
ledger).
"""

from __future__ import annotations

import re
import time
from datetime import timedelta

import pytest
import redis
from django.utils import timezone

from django_rqueue.conf import get_config
from django_rqueue.engine.keys import QueueKeys
from tests.jobs_app.jobs import fault_noop
from tests.support.redis_commands import wait_blocked

from .harness import Faults, WorkerProcess, wait_until

POLLERS = 5
WORKERS = 3
JOBS = 10_000
#: Seconds from the enqueue to the instant every job falls due.
DUE_IN = 3.0


@pytest.mark.slow
def test_five_pollers_and_three_workers_race_over_10000_due_jobs(
    faults: Faults, redis_client: redis.Redis
) -> None:
    # --verbosity 2: the pollers log "promoted N due job(s)" for every batch they move.
    pollers = [
        faults.command("rqueue_poller", "--queues", "default", "--verbosity", "2")
        for _ in range(POLLERS)
    ]
    workers = [
        faults.worker("--queues", "default", "--concurrency", "1", "--without-poller")
        for _ in range(WORKERS)
    ]
    for worker in workers:
        faults.wait_ready(worker)
    wait_blocked(redis_client, POLLERS + WORKERS, timeout=20)

    keys = QueueKeys.of(get_config().key_prefix, "default")
    started = time.monotonic()
    jobs = fault_noop.using(run_at=timezone.now() + timedelta(seconds=DUE_IN)).delay_many(
        ((faults.ledger, f"j{i}"), {}) for i in range(JOBS)
    )
    enqueued = time.monotonic() - started
    assert redis_client.zcard(keys.delayed) == JOBS, "some jobs fell due during the enqueue"
    print(f"enqueued {JOBS} delayed jobs in {enqueued:.1f} s")

    wait_until(
        lambda: int(redis_client.hget(keys.stats, "succeeded") or 0) >= JOBS,
        timeout=90,
        interval=0.25,
        message="not every job succeeded",
    )
    drained = time.monotonic() - started - DUE_IN
    print(f"{JOBS} jobs promoted and run {drained:.1f} s after they fell due")

    ids = [j.id for j in jobs]
    report = faults.check(ids)
    assert set(report.states.values()) == {"succeeded"}
    assert report.duplicates == {}, f"{len(report.duplicates)} job(s) ran twice"
    assert sum(report.starts.values()) == JOBS
    assert redis_client.zcard(keys.delayed) == 0 and redis_client.zcard(keys.reserved) == 0

    promoted = [
        sum(int(n) for n in re.findall(r"promoted (\d+) due job", p.stderr())) for p in pollers
    ]
    print(f"promoted per poller: {promoted}; jobs run per worker: {per_worker(faults, workers)}")
    assert sum(promoted) == JOBS, "a job was promoted twice (or never)"
    assert all(p.alive() for p in pollers) and all(w.alive() for w in workers)


def per_worker(faults: Faults, workers: list[WorkerProcess]) -> list[int]:
    """How many job starts the ledger shows in each worker's children."""
    counts = [0] * len(workers)
    children = [set(w.children()) for w in workers]
    for event in faults.events("start"):
        for index, pids in enumerate(children):
            if event["pid"] in pids:
                counts[index] += 1
    return counts
