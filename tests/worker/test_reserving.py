"""Which reserve calls a worker serving several queues in strict order makes
(django_rqueue.worker.reserving.Reserver.sweep): after an empty first queue, one pipelined
read says which others hold queued jobs, and only those are asked."""

from __future__ import annotations

from typing import Any

import pytest
from pytest_django.fixtures import Settings as SettingsFixture

from django_rqueue import JobStatus
from django_rqueue.engine import run
from django_rqueue.engine.commands import Command
from tests.jobs_app.jobs import read_ledger, record
from tests.support.inprocess import run_worker

pytestmark = pytest.mark.usefixtures("worker_may_close_db_connections")

QUEUES = ("default", "emails", "low", "q3", "q4", "q5")


@pytest.fixture
def six_queues(settings: SettingsFixture) -> None:
    settings.RQUEUE = {
        **settings.RQUEUE,
        "QUEUES": {**settings.RQUEUE["QUEUES"], **{q: {} for q in QUEUES[3:]}},
    }


@pytest.mark.usefixtures("six_queues")
def test_empty_lower_priority_queues_cost_no_reserve_call(
    ledger: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Jobs only in the fifth queue: each fetch reserves the first queue (empty), then
    the fifth, never the four empty ones between them."""
    reserved_from: list[str] = []
    real = run.execute

    def noting(client: Any, step: Any, *args: Any) -> Any:
        if isinstance(step, Command) and step.call.script == "reserve":
            reserved_from.append(step.call.keys[0].split("{")[1].split("}")[0])
        return real(client, step, *args)

    monkeypatch.setattr(run, "execute", noting)
    jobs = [record.using(queue="q4").delay(ledger, str(n)) for n in range(5)]

    worker = run_worker(QUEUES, burst=True)

    assert worker.processed == 5
    for job in jobs:
        job.refresh()
        assert job.status is JobStatus.SUCCEEDED
    assert set(reserved_from) <= {"default", "q4", "q5"}
    assert reserved_from.count("q4") >= 5


@pytest.mark.usefixtures("six_queues")
def test_a_higher_queue_is_still_served_first(ledger: str) -> None:
    low = [record.using(queue="q5").delay(ledger, f"low{n}") for n in range(3)]
    high = [record.using(queue="emails").delay(ledger, f"high{n}") for n in range(3)]

    run_worker(QUEUES, burst=True)

    order = [e["tag"] for e in read_ledger(ledger)]
    assert order[:3] == [j.args[1] for j in high] and order[3:] == [j.args[1] for j in low]
