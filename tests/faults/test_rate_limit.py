"""A queue's ``rate_limit`` holds across workers (two real ``rqueue_work`` processes).

The queue ``metered`` is limited to 20 jobs a second; two supervisors with a
worker child each drain a backlog of it. The rate is measured on the jobs'
``started_at`` (Redis time of each reservation, from the job records), never
on the test's clock: over the first 5 seconds it is within 10 % of 20/s, and
no 5-second window holds more than 10 % over. Both workers take part.
Parametrized over the two ways a worker reserves: one job with each ack
(``ack_reserve.lua``, while ``job_succeeded`` has receivers, as the fault
jobs have) and batches (short jobs, no receiver).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pytest_django.fixtures import Settings as SettingsFixture

from tests.jobs_app.jobs import fault_noop

from .harness import Faults, job_hash, wait_until

QUEUE = "metered"
RATE = 20  # jobs a second
OPTIONS = {QUEUE: {"rate_limit": f"{RATE}/s"}}
#: Seconds measured, and how far off the rate may be.
WINDOW, MARGIN = 5.0, 0.10
#: Workers started with this have no job_succeeded receiver (tests/jobs_app/jobs.py).
NO_RECEIVER = {"RQUEUE_TEST_NO_SUCCESS_RECEIVER": "1"}


def started_ms(faults: Faults, ids: list[str]) -> list[int]:
    """The ``started_at`` (ms, Redis clock) of those of ``ids`` that started, sorted."""
    records = [job_hash(faults.client, i, QUEUE) for i in ids]
    return sorted(int(r["started_at"]) for r in records if "started_at" in r)


@pytest.mark.slow
@pytest.mark.parametrize("reserving", ["with each ack", "in batches"])
def test_two_workers_together_keep_to_the_rate_limit_within_ten_percent(
    faults: Faults, settings: SettingsFixture, reserving: str
) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "QUEUES": {**settings.RQUEUE["QUEUES"], **OPTIONS}}
    env: dict[str, Any] = {"RQUEUE_TEST_QUEUE_OPTIONS": json.dumps(OPTIONS)}
    if reserving == "in batches":
        env |= NO_RECEIVER
    # A backlog of 8 seconds' worth, so the workers are never short of jobs.
    calls: list[tuple[tuple[str, str], dict[str, Any]]] = [
        ((faults.ledger, f"j{n}"), {}) for n in range(8 * RATE)
    ]
    ids = [j.id for j in fault_noop.using(queue=QUEUE).delay_many(calls)]
    workers = [faults.worker("--queues", QUEUE, "--concurrency", "1", env=env) for _ in range(2)]
    for worker in workers:
        faults.wait_ready(worker)

    needed = int((WINDOW + 1) * RATE)
    wait_until(
        lambda: len(started_ms(faults, ids)) >= needed,
        timeout=30,
        interval=0.2,
        message=f"fewer than {needed} jobs started",
    )
    times = started_ms(faults, ids)
    span = WINDOW * 1000

    def in_window(start: int) -> int:
        return sum(1 for t in times if start <= t < start + span)

    first = in_window(times[0])
    busiest = max(in_window(t) for t in times if t + span <= times[-1])
    print(f"{first} jobs in the first {WINDOW:.0f} s, at most {busiest} in any {WINDOW:.0f} s")
    expected = RATE * WINDOW
    assert (1 - MARGIN) * expected <= first <= (1 + MARGIN) * expected
    assert busiest <= (1 + MARGIN) * expected
    runners = {job_hash(faults.client, i, QUEUE).get("worker") for i in ids[:needed]}
    assert len(runners - {None}) == 2, runners  # both workers took part
    assert all(w.alive() for w in workers)
