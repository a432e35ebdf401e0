"""Attempt durations (include/observe_duration.lua): counted by ack and fail, per job name,
in the one bucket each attempt falls in; never by a stale report, a reclaim or a release."""

from __future__ import annotations

import pytest

from django_rqueue import LeaseLost
from django_rqueue.engine.connection import as_text
from django_rqueue.engine.fields import DurationFields
from tests.support import transitions
from tests.support.engine import Engine
from tests.support.waiting import wait_until

NAME = "tests.noop"
#: Milliseconds a report may take on a slow host, on top of the duration a test sets.
SLACK_MS = 1_000


def started_ago(engine: Engine, job_id: str, ms: int) -> None:
    """Make the running job's attempt look as if it started ``ms`` ago (Redis clock)."""
    engine.client.hset(engine.keys.job(job_id), "started_at", engine.now_ms() - ms)


def durations(engine: Engine) -> dict[str, int]:
    raw = engine.client.hgetall(engine.keys.durations)
    return {as_text(k): int(v) for k, v in raw.items()}


def buckets(engine: Engine, name: str = NAME) -> dict[str, int]:
    """The non-empty buckets of ``name``: bound (ms, or "inf") -> attempts."""
    found = {}
    for field, value in durations(engine).items():
        kind, job = DurationFields.parse(field)
        if job == name and kind != DurationFields.SUM:
            found[kind] = value
    return found


def total_ms(engine: Engine, name: str = NAME) -> int:
    return durations(engine).get(DurationFields.total(name), 0)


def test_an_ack_counts_the_attempt_in_its_bucket_and_sum(engine: Engine):
    job_id = engine.add()
    engine.reserve_id()
    started_ago(engine, job_id, 2_000)
    engine.ack(job_id)
    assert buckets(engine) == {"2500": 1}  # 2 s: above 1 s, at most 2.5 s
    assert 2_000 <= total_ms(engine) <= 2_000 + SLACK_MS


def test_failure_reports_count_each_attempt_retried_or_final(engine: Engine):
    job_id = engine.add(max_attempts=2)
    engine.reserve_id()
    started_ago(engine, job_id, 40_000)
    assert engine.fail(job_id, retry_ms=0)[0] == "retrying"
    wait_until(lambda: engine.promote()[0] == 1, message="retry promoted")
    engine.reserve_id()
    started_ago(engine, job_id, 3_700_000)
    assert engine.fail(job_id, retry_ms=0)[0] == "failed"
    assert buckets(engine) == {"60000": 1, "inf": 1}
    assert 3_740_000 <= total_ms(engine) <= 3_740_000 + 2 * SLACK_MS


def test_a_clock_stepped_back_counts_zero_and_job_names_are_kept_apart(engine: Engine):
    quick = engine.add(name="app.jobs.quick")
    task = engine.add(name="task:app.tasks.slow")
    engine.reserve_id()
    engine.reserve_id()
    started_ago(engine, quick, -60_000)  # "started" in the future: the Redis clock stepped back
    started_ago(engine, task, 7_000)
    engine.ack(quick)
    engine.ack(task)
    assert buckets(engine, "app.jobs.quick") == {"5": 1}
    assert total_ms(engine, "app.jobs.quick") == 0
    assert buckets(engine, "task:app.tasks.slow") == {"7500": 1}
    assert set(durations(engine)) == {
        DurationFields.bucket(5, "app.jobs.quick"),
        DurationFields.total("app.jobs.quick"),
        DurationFields.bucket(7_500, "task:app.tasks.slow"),
        DurationFields.total("task:app.tasks.slow"),
    }


def test_ack_and_reserve_counts_the_acked_attempt(engine: Engine):
    first, second = engine.add(), engine.add()
    assert engine.reserve_id() == first
    started_ago(engine, first, 400)
    stale, got = transitions.ack_and_reserve(
        engine.client,
        engine.keys,
        first,
        engine.token(first),
        "null",
        600,
        lease_ms=30_000,
        worker_id="w1",
    )
    assert stale is None
    assert got.jobs and got.jobs[0][0] == second
    assert buckets(engine) == {"500": 1}


def test_stale_reports_reclaims_and_releases_count_nothing(engine: Engine):
    job_id = engine.add(max_attempts=3)
    engine.reserve_id()
    token = engine.token(job_id)
    engine.release(job_id, token)  # a graceful shutdown hands it back: no attempt ended
    engine.reserve(lease_ms=1)
    wait_until(lambda: engine.reclaim()[:2] == (1, 0), message="lease reclaimed")
    for report in (engine.ack, lambda i, t: engine.fail(i, token=t)):
        with pytest.raises(LeaseLost):
            report(job_id, token)
    assert durations(engine) == {}
