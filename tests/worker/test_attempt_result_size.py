"""A result copied into dependents is bounded by ``RQUEUE["MAX_PAYLOAD_BYTES"]``: a job
with a dependent that copies its result (edge copy ``p``) and returns more fails that
attempt, before its ack; a count-only dependent, or no dependent, leaves it alone."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from django_rqueue import JobStatus, get_job
from django_rqueue.dependencies import EdgeCopy
from django_rqueue.engine.fields import JobFields
from django_rqueue.engine.keys import new_job_id
from django_rqueue.serialization import encode_arguments
from tests.jobs_app.jobs import record
from tests.support.dependencies import add_nodes, edge, node
from tests.support.engine import Engine
from tests.support.inprocess import keys, run_worker

pytestmark = pytest.mark.usefixtures("worker_may_close_db_connections")

LIMIT = 400


def limit(settings: Any) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "MAX_PAYLOAD_BYTES": LIMIT}


@pytest.fixture
def engine(settings: Any, rqueue_redis: redis.Redis) -> Engine:
    limit(settings)
    return Engine(rqueue_redis, keys())


def with_dependent(engine: Engine, ledger: str, tag: str, copy: EdgeCopy) -> tuple[str, str]:
    """A live job running ``record(ledger, tag)`` (one attempt) and its dependent ``d``
    (policy "cancel", result passed when ``copy`` is ``p``)."""
    a, d = new_job_id(engine.queue), new_job_id(engine.queue)
    name = "tests.jobs_app.jobs.record"
    source = node(
        engine,
        job_id=a,
        nx=edge(d, 1, "i", copy),
        name=name,
        extra={JobFields.PAYLOAD: encode_arguments([ledger, tag], {}), JobFields.MAX_ATTEMPTS: 1},
    )
    dependent = node(
        engine,
        job_id=d,
        inputs=[a],
        name=name,
        extra={JobFields.PAYLOAD: encode_arguments([ledger, "d"], {})},
    )
    assert add_nodes(engine, [dependent, source]) == []
    return a, d


def test_a_result_over_the_limit_copied_into_a_dependent_fails_the_attempt(
    engine: Engine, ledger: str
) -> None:
    a, d = with_dependent(engine, ledger, "x" * LIMIT, "p")  # its JSON: LIMIT + 2 bytes

    run_worker(burst=True)

    job = get_job(a)
    assert job is not None and job.status is JobStatus.FAILED
    assert job.result is None
    assert job.error is not None and job.error["type"] == "builtins.ValueError"
    assert f"MAX_PAYLOAD_BYTES'] ({LIMIT})" in job.error["message"]
    assert f"{LIMIT + 2} bytes" in job.error["message"]
    assert engine.job(d)[JobFields.CANCEL_REASON] == "dependency_failed"


def test_a_result_at_the_limit_is_copied(engine: Engine, ledger: str) -> None:
    a, d = with_dependent(engine, ledger, "x" * (LIMIT - 2), "p")

    run_worker(burst=True, max_jobs=2)

    job = get_job(a)
    assert job is not None and job.status is JobStatus.SUCCEEDED
    assert engine.state(d) == "succeeded"


def test_a_count_only_dependent_copies_nothing_and_bounds_nothing(
    engine: Engine, ledger: str
) -> None:
    a, d = with_dependent(engine, ledger, "x" * LIMIT, "c")

    run_worker(burst=True, max_jobs=1)

    job = get_job(a)
    assert job is not None and job.status is JobStatus.SUCCEEDED
    assert engine.state(d) == "queued"


def test_a_job_without_dependents_returns_what_it_likes(settings: Any, ledger: str) -> None:
    plain = record.delay(ledger, "x" * LIMIT)
    limit(settings)  # after the enqueue, which bounds the arguments

    run_worker(burst=True)

    job = get_job(plain.id)
    assert job is not None and job.status is JobStatus.SUCCEEDED
    assert job.result == "x" * LIMIT
