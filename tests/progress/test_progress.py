"""Progress and metadata (``JobContext.set_progress``, ``save_metadata``): written by a real
worker process, read by this one while the job runs and after; fenced by the job's token;
bounded; EAGER."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from pytest_django.fixtures import Settings as SettingsFixture

from django_rqueue import JobContext, JobStatus, get_job
from django_rqueue.exceptions import LeaseLost
from django_rqueue.job import Job
from django_rqueue.progress import (
    MAX_MESSAGE_LENGTH,
    MAX_METADATA_BYTES,
    Progress,
    encode_metadata,
    encode_progress,
)
from tests.faults.harness import Faults
from tests.jobs_app.jobs import read_ledger
from tests.jobs_app.progress_jobs import aprogress_steps, progress_steps
from tests.support import transitions
from tests.support.inprocess import keys
from tests.support.waiting import wait_until


def reported(ledger: str, tag: str) -> list[dict[str, object]]:
    return [e for e in read_ledger(ledger) if e["event"] == "reported" and e["tag"] == tag]


@pytest.mark.parametrize("function", [progress_steps, aprogress_steps], ids=["sync", "async"])
def test_a_worker_process_reports_progress_another_process_reads_it(
    faults: Faults, tmp_path: Path, function: Any
) -> None:
    faults.wait_ready(faults.worker("--queues", "default", "--concurrency", "1", lease=2))
    gate = tmp_path / "gate"
    queued = function.delay(faults.ledger, "p", str(gate))
    assert get_job(queued.id).progress is None  # type: ignore[union-attr]
    wait_until(lambda: reported(faults.ledger, "p"), timeout=20, message="no progress reported")

    running = get_job(queued.id)
    assert running is not None and running.status == JobStatus.RUNNING
    assert running.progress is not None
    assert (running.progress.current, running.progress.total) == (1, 3)
    assert running.progress.message == "first"
    assert running.progress.fraction == pytest.approx(1 / 3)
    assert running.progress.updated_at is not None
    assert running.progress.updated_at >= running.started_at  # type: ignore[operator]
    assert running.metadata == {"step": 1}

    gate.touch()
    done = queued.wait(timeout=20)
    assert done.status == JobStatus.SUCCEEDED
    assert done.progress is not None and done.progress.as_dict()["fraction"] == 1.0
    assert (done.progress.current, done.progress.message) == (3, "done")
    assert done.metadata == {"step": 2}  # kept with the record after the job ended


def running_job(client: redis.Redis) -> Job[object]:
    """A job reserved here (a worker's view of it: its id and token)."""
    queued = progress_steps.delay("unused", "t", "unused")
    got = transitions.reserve(client, keys(), lease_ms=60_000, worker_id="w1")
    assert got is not None
    job = get_job(queued.id)
    assert job is not None and job.status == JobStatus.RUNNING and job.token >= 1
    return job


def test_a_stale_attempt_cannot_write(rqueue_redis: redis.Redis) -> None:
    job = running_job(rqueue_redis)
    context = JobContext(job=job, attempt=1)
    context.set_progress(5, 10)
    context.metadata["a"] = 1
    context.save_metadata()
    # The lease is reclaimed and the job reserved again: a new token.
    transitions.release(rqueue_redis, keys(), job.id, job.token)
    again = transitions.reserve(rqueue_redis, keys(), lease_ms=60_000, worker_id="w2")
    assert again is not None
    with pytest.raises(LeaseLost, match="stale fencing token"):
        context.set_progress(9, 10, "stale")
    context.metadata["a"] = 2
    with pytest.raises(LeaseLost, match="stale fencing token"):
        context.save_metadata()
    stored = get_job(job.id)
    assert stored is not None and stored.token > job.token
    assert stored.progress is not None and stored.progress.current == 5
    assert stored.metadata == {"a": 1}


def test_a_finished_job_cannot_write(rqueue_redis: redis.Redis) -> None:
    job = running_job(rqueue_redis)
    transitions.ack(rqueue_redis, keys(), job.id, job.token, "null", 60)
    with pytest.raises(LeaseLost, match="job is succeeded"):
        JobContext(job=job, attempt=1).set_progress(1)


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ((True, None, ""), TypeError, "current must be an int or a float"),
        (("1", None, ""), TypeError, "current must be an int or a float"),
        ((-1, None, ""), ValueError, "current must be a finite number >= 0"),
        ((math.nan, None, ""), ValueError, "current must be a finite number"),
        ((1, math.inf, ""), ValueError, "total must be a finite number"),
        ((1, 0, ""), ValueError, "total must be > 0"),
        ((1, None, 3), TypeError, "message must be a str"),
        ((1, None, "x" * (MAX_MESSAGE_LENGTH + 1)), ValueError, "longer than 1000"),
    ],
)
def test_bad_progress_is_refused(
    args: tuple[object, ...], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        encode_progress(*args)


@pytest.mark.parametrize(
    ("metadata", "error", "match"),
    [
        ([1], TypeError, "must be a dict"),
        ({1: "a"}, TypeError, "keys must be str"),
        ({"a": object()}, TypeError, "must be JSON"),
        ({"a": {1, 2}}, TypeError, "must be JSON"),
        ({"a": math.nan}, ValueError, "must be JSON"),
        ({"a": "x" * MAX_METADATA_BYTES}, ValueError, "larger than 65536 bytes"),
    ],
)
def test_bad_metadata_is_refused(metadata: object, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        encode_metadata(metadata)


def test_refused_values_write_nothing(rqueue_redis: redis.Redis) -> None:
    job = running_job(rqueue_redis)
    context = JobContext(job=job, attempt=1)
    with pytest.raises(ValueError, match="total must be > 0"):
        context.set_progress(1, 0)
    context.metadata["big"] = "é" * (MAX_METADATA_BYTES // 2)  # 2 bytes each in UTF-8
    with pytest.raises(ValueError, match="larger than"):
        context.save_metadata()
    stored = get_job(job.id)
    assert stored is not None and stored.progress is None and stored.metadata == {}


def test_a_corrupt_progress_or_metadata_field_is_a_problem_not_a_crash(
    rqueue_redis: redis.Redis,
) -> None:
    job = running_job(rqueue_redis)
    rqueue_redis.hset(keys().job(job.id), mapping={"progress": "{", "metadata": "[1]"})
    stored = get_job(job.id)
    assert stored is not None and stored.progress is None and stored.metadata == {}
    assert [p.split(":")[0] for p in stored.problems] == [
        "undecodable progress",
        "undecodable metadata",
    ]


def test_metadata_is_encrypted_at_rest_with_encryption_keys(
    rqueue_redis: redis.Redis, settings: SettingsFixture
) -> None:
    from cryptography.fernet import Fernet

    settings.RQUEUE = {**settings.RQUEUE, "ENCRYPTION_KEYS": [Fernet.generate_key().decode()]}
    job = running_job(rqueue_redis)
    context = JobContext(job=job, attempt=1)
    context.metadata["secret"] = "s3cr3t"
    context.save_metadata()
    raw = rqueue_redis.hget(keys().job(job.id), "metadata")
    assert isinstance(raw, bytes) and raw.startswith(b"fernet:") and b"s3cr3t" not in raw
    stored = get_job(job.id)
    assert stored is not None and stored.metadata == {"secret": "s3cr3t"}


@pytest.fixture
def eager(settings: SettingsFixture, rqueue_redis: redis.Redis) -> Iterator[None]:
    settings.RQUEUE = {**settings.RQUEUE, "EAGER": True}
    yield
    assert rqueue_redis.dbsize() == 0


@pytest.mark.usefixtures("eager")
@pytest.mark.parametrize("function", [progress_steps, aprogress_steps], ids=["sync", "async"])
def test_eager_jobs_keep_progress_and_metadata_in_memory(
    function: Any, tmp_path: Path, ledger: str
) -> None:
    gate = tmp_path / "gate"
    gate.touch()
    done = function.delay(ledger, "e", str(gate))
    assert done.status == JobStatus.SUCCEEDED
    assert isinstance(done.progress, Progress)
    assert (done.progress.current, done.progress.total, done.progress.message) == (3, 3, "done")
    assert done.progress.updated_at is not None
    assert done.metadata == {"step": 2}
