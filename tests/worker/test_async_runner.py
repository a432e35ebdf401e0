"""Async jobs in a worker run in the test process (django_rqueue.worker.async_runner).

The worker runs in the main thread, as a supervised child does (a sync job's
soft timeout is SIGALRM, main thread only); a *driver* thread watches the
ledger and Redis and opens the gate the ``fault_async_gate`` jobs await, so
each test proves its jobs were in flight together without timing anything.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis
from pytest_django.fixtures import Settings

from django_rqueue import JobStatus, aget_job, get_job
from django_rqueue.engine import run
from django_rqueue.engine.calls import ScriptCall
from django_rqueue.engine.commands import Command
from django_rqueue.engine.connection import close_async_clients, location_of, reset_clients
from django_rqueue.exceptions import RedisUnavailable
from django_rqueue.worker.async_runner import AsyncRunner, is_async_job
from django_rqueue.worker.loop import Worker
from django_rqueue.worker.outages import Outages
from django_rqueue.worker.poller import Poller
from django_rqueue.worker.prefetch import Prefetched
from tests.conftest import Event
from tests.jobs_app.jobs import (
    async_record,
    fault_async_flaky,
    fault_async_gate,
    fault_async_overrun,
    read_ledger,
    record,
    sleepy_timeout,
)
from tests.support.inprocess import keys, run_worker, tags
from tests.support.jobs_in_state import Jobs
from tests.support.waiting import wait_until

pytestmark = pytest.mark.usefixtures("worker_may_close_db_connections")


def lines(ledger: str, event: str, tag: str | None = None) -> list[dict[str, Any]]:
    return [e for e in read_ledger(ledger) if e["event"] == event and tag in (None, e["tag"])]


@contextmanager
def driver(step: Callable[[], None]) -> Iterator[None]:
    """Run ``step`` in a thread while the block runs (the worker); re-raise what it raised."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            step()
        except BaseException as exc:  # handed to the test thread below
            failure.append(exc)

    thread = threading.Thread(target=run, name="test-driver", daemon=True)
    thread.start()
    yield
    thread.join(30)
    assert not thread.is_alive(), "the driver thread is stuck"
    if failure:
        raise failure[0]


def open_gate_when(gate: Path, condition: Callable[[], object], message: str) -> Callable[[], None]:
    """A driver step: wait (bounded) for ``condition``, then create ``gate``, even on failure."""

    def step() -> None:
        try:
            wait_until(condition, timeout=15, interval=0.01, message=message)
        finally:
            gate.touch()

    return step


def test_async_jobs_are_told_apart_from_sync_unknown_and_corrupt_ones(jobs: Jobs) -> None:
    assert fault_async_gate.is_async and async_record.is_async and not record.is_async
    ledger = "/dev/null"
    assert is_async_job(async_record.delay(ledger, "a"))
    assert not is_async_job(record.delay(ledger, "s"))
    unknown = get_job(jobs.queued(name="tests.jobs_app.jobs.nowhere"))
    assert unknown is not None and not is_async_job(unknown)
    corrupt = get_job(jobs.queued(name="tests.jobs_app.jobs.async_record", payload="{not json"))
    assert corrupt is not None and corrupt.problems and not is_async_job(corrupt)


def test_an_in_process_worker_runs_async_jobs_at_once_each_under_its_own_lease(
    ledger: str, tmp_path: Path, rqueue_redis: redis.Redis
) -> None:
    gate = tmp_path / "gate"
    jobs = [fault_async_gate.delay(ledger, f"j{i}", str(gate)) for i in range(20)]

    def all_started() -> bool:
        return len(lines(ledger, "start")) == 20

    with driver(open_gate_when(gate, all_started, "20 async jobs were not in flight at once")):
        worker = run_worker(burst=True, async_concurrency=20)

    assert worker.processed == 20
    starts = lines(ledger, "start")
    assert len({(e["id"], e["token"]) for e in starts}) == 20  # a reservation (token) each
    for j in jobs:
        j.refresh()
        assert (j.status, j.attempts, j.result) == (JobStatus.SUCCEEDED, 1, j.args[1])


def test_a_coroutine_past_its_timeout_is_cancelled_and_fails_while_the_others_go_on(
    ledger: str, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    others = [fault_async_gate.delay(ledger, f"other{i}", str(gate)) for i in range(5)]
    overrun = fault_async_overrun.delay(ledger, "overrun", 30)

    def overrun_failed_while_others_wait() -> bool:
        return bool(lines(ledger, "failed", "overrun")) and len(lines(ledger, "start")) == 6

    with driver(open_gate_when(gate, overrun_failed_while_others_wait, "no soft timeout")):
        run_worker(burst=True, async_concurrency=10)

    overrun.refresh()
    assert overrun.status == JobStatus.FAILED
    assert overrun.error is not None
    assert overrun.error["type"] == "django_rqueue.exceptions.JobTimeout"
    assert overrun.error["message"] == "job exceeded its timeout of 0.5 s"
    assert "fault_async_overrun" in overrun.error["traceback"]  # where it was cancelled
    assert not lines(ledger, "end", "overrun")  # cancelled at its await
    failed_at = lines(ledger, "failed", "overrun")[0]["t"]
    for other in others:
        other.refresh()
        assert other.status == JobStatus.SUCCEEDED
        [end] = lines(ledger, "end", other.args[1])
        assert end["t"] > failed_at  # it was still running when the overrun was cancelled


def test_an_async_job_retries_with_the_same_signals_as_a_sync_one(
    ledger: str, events: list[Event]
) -> None:
    flaky = fault_async_flaky.delay(ledger, "flaky", 1)
    run_worker(burst=True)  # attempt 1 fails; the retry waits for its backoff
    retrying = get_job(flaky.id)
    assert retrying is not None and retrying.status == JobStatus.SCHEDULED
    retrying.run_now()
    run_worker(burst=True)

    flaky.refresh()
    assert (flaky.status, flaky.attempts, flaky.result) == (JobStatus.SUCCEEDED, 2, 2)
    seen = [(name, sender) for name, sender, _ in events]
    assert seen == [
        ("job_enqueued", fault_async_flaky),
        ("job_started", fault_async_flaky),
        ("job_retrying", fault_async_flaky),
        ("job_started", fault_async_flaky),
        ("job_succeeded", fault_async_flaky),
    ]
    retry = events[2][2]
    assert isinstance(retry["exception"], ValueError)
    assert "flaky flaky attempt 1" in retry["traceback"]
    assert retry["delay"] == pytest.approx(0.1)
    assert events[4][2]["result"] == 2
    assert events[1][2]["job"].attempts == 1 and events[3][2]["job"].attempts == 2


def test_a_sync_job_reserved_among_async_ones_waits_for_them_then_runs_alone(
    ledger: str, tmp_path: Path, jobs: Jobs
) -> None:
    """The sync job is reserved while async jobs run (held, not started), starts only
    when they are done, and keeps its SIGALRM soft timeout; the async jobs queued after
    it run after it."""
    gate = tmp_path / "gate"
    before = [fault_async_gate.delay(ledger, f"before{i}", str(gate)) for i in range(3)]
    sync = sleepy_timeout.delay(ledger, "sync", 30)
    after = [async_record.delay(ledger, f"after{i}") for i in range(2)]

    def sync_job_held_while_async_ones_run() -> bool:
        running = len(lines(ledger, "start")) == 3
        return running and jobs.state(sync.id) == "running"  # reserved, not started

    with driver(open_gate_when(gate, sync_job_held_while_async_ones_run, "sync job not held")):
        worker = run_worker(burst=True, async_concurrency=10)

    assert worker.processed == 6
    ended = max(e["t"] for e in lines(ledger, "end"))
    [started] = lines(ledger, "start", "sync")
    assert started["t"] > ended  # it ran alone, after the async jobs before it
    assert all(e["t"] > started["t"] for e in lines(ledger, "run"))
    sync.refresh()
    assert sync.error is not None and sync.status == JobStatus.FAILED
    assert sync.error["message"] == "job exceeded its timeout of 0.5 s"  # SIGALRM
    assert not lines(ledger, "end", "sync")
    for j in [*before, *after]:
        j.refresh()
        assert j.status == JobStatus.SUCCEEDED


def test_free_async_slots_take_no_more_jobs_of_a_group_than_its_cap(
    ledger: str, tmp_path: Path, rqueue_redis: redis.Redis, settings: Settings
) -> None:
    queues = {**settings.RQUEUE["QUEUES"], "default": {"group_concurrency": 2}}
    settings.RQUEUE = {**settings.RQUEUE, "QUEUES": queues}
    gate = tmp_path / "gate"
    jobs = [fault_async_gate.using(group="a").delay(ledger, f"a{i}", str(gate)) for i in range(6)]
    jobs += [fault_async_gate.using(group="b").delay(ledger, f"b{i}", str(gate)) for i in range(2)]
    seen: list[Any] = []

    def two_of_each_run() -> bool:
        if len(lines(ledger, "start")) < 4:
            return False
        # Ten free slots, one reserve for all of them: only the slots the cap allows.
        seen.append(rqueue_redis.zcard(keys().reserved))
        seen.append(rqueue_redis.hgetall(keys().grouprun))
        return True

    with driver(open_gate_when(gate, two_of_each_run, "four async jobs did not start")):
        worker = run_worker(burst=True, async_concurrency=10)

    assert seen == [4, {b"a": b"2", b"b": b"2"}]
    assert worker.processed == 8
    assert {get_job(j.id).status for j in jobs} == {JobStatus.SUCCEEDED}  # type: ignore[union-attr]
    assert rqueue_redis.exists(keys().grouprun, keys().groupfull) == 0


def test_async_jobs_run_one_at_a_time_by_default_and_max_jobs_counts_them(ledger: str) -> None:
    jobs = [async_record.delay(ledger, f"r{i}") for i in range(5)]
    worker = Worker(["default"], burst=True, with_poller=False, max_jobs=3)
    assert worker.async_concurrency == 1  # RQUEUE["ASYNC_CONCURRENCY"] unset
    assert worker.run() == 0
    assert worker.processed == 3
    assert [e["tag"] for e in lines(ledger, "run")] == ["r0", "r1", "r2"]
    assert [get_job(j.id).status for j in jobs[3:]] == [JobStatus.QUEUED] * 2  # type: ignore[union-attr]


@pytest.mark.parametrize("value", [0, -1, 2.5, True])
def test_a_bad_async_concurrency_is_a_value_error(value: Any) -> None:
    with pytest.raises(ValueError, match="async_concurrency"):
        Worker(["default"], async_concurrency=value)


def test_with_a_cache_alias_the_event_loop_reaches_redis_through_threads(
    settings: Settings, ledger: str, tmp_path: Path
) -> None:
    """django-redis has no asyncio client: reservations, the idle wait, adelay and
    aget_job run the sync calls in threads."""
    url = settings.RQUEUE["REDIS_URL"]
    settings.CACHES = {
        **settings.CACHES,
        "jobs": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": url},
    }
    settings.RQUEUE = {"CACHE_ALIAS": "jobs", "QUEUES": {"default": {}}}
    gate = tmp_path / "gate"
    try:
        first = [fault_async_gate.delay(ledger, f"a{i}", str(gate)) for i in range(3)]

        def enqueue_while_idle_then_open() -> None:
            wait_until(lambda: len(lines(ledger, "start")) == 3, timeout=15)
            late = asyncio.run(fault_async_gate.adelay(ledger, "late", str(gate)))
            assert asyncio.run(aget_job(late.id)) is not None
            first.append(late)
            open_gate_when(gate, lambda: len(lines(ledger, "start")) == 4, "late not run")()

        with driver(enqueue_while_idle_then_open):
            run_worker(burst=True, async_concurrency=10)
    finally:
        reset_clients()  # no cached client of the "jobs" cache outlives this test
    assert [get_job(j.id).status for j in first] == [JobStatus.SUCCEEDED] * 4  # type: ignore[union-attr]


#: Weights, and the async jobs queued on each: none runs dry among the first SERVED.
WEIGHTED = {"default": (5, 5000), "emails": (3, 3000), "low": (1, 1200)}
SERVED = 7200


@pytest.mark.slow
def test_async_slots_are_shared_by_the_queue_weights(
    ledger: str, rqueue_redis: redis.Redis
) -> None:
    """Each free slot gets its own weighted draw: under a backlog on every queue the
    shares of SERVED jobs follow the weights within 10 % (low: 800 +- 27 expected)."""
    for queue, (_weight, count) in WEIGHTED.items():
        async_record.using(queue=queue).delay_many(((ledger, queue), {}) for _ in range(count))
    weights = {q: w for q, (w, _n) in WEIGHTED.items()}

    worker = run_worker(
        list(WEIGHTED), weights=weights, async_concurrency=10, max_jobs=SERVED, limit=120
    )

    assert worker.processed == SERVED
    served = {q: int(rqueue_redis.hget(f"rqueue:{{{q}}}:stats", "succeeded") or 0) for q in weights}
    print(f"{SERVED} async jobs served: {served}")
    assert sum(served.values()) == SERVED
    for queue, weight in weights.items():
        expected = SERVED * weight / sum(weights.values())
        assert abs(served[queue] - expected) <= 0.1 * expected, served


def test_one_fill_gives_each_free_slot_its_own_weighted_draw(
    ledger: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1 000 free slots at once (a session starting) are shared by the weights, not all
    handed to the queue that comes first in the fill's order."""
    weights = {q: w for q, (w, _n) in WEIGHTED.items()}
    for queue in weights:
        async_record.using(queue=queue).delay_many(((ledger, queue), {}) for _ in range(1000))
    worker = Worker(list(weights), weights=weights, with_poller=False, async_concurrency=1000)
    runner = AsyncRunner(
        worker.reserver,
        Prefetched(worker.worker_id, None),
        None,
        worker.limits,
        worker.idle,
        None,
        slots=1000,
        renew_leases=True,
    )
    started: Counter[str] = Counter()
    monkeypatch.setattr(runner, "_start", lambda queue, job: started.update([queue]))

    async def fill() -> bool:
        try:
            return await runner._fill()
        finally:
            await close_async_clients()

    asyncio.run(fill())

    assert sum(started.values()) == 1000
    total = sum(weights.values())
    for queue, weight in weights.items():  # within 4 standard deviations of the binomial
        p = weight / total
        assert abs(started[queue] - 1000 * p) <= 4 * (1000 * p * (1 - p)) ** 0.5, started


def test_async_jobs_whose_reserve_reply_came_back_after_their_lease_are_not_run(
    ledger: str, rqueue_redis: redis.Redis, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "LEASE": 1}
    async_record.delay(ledger, "first")  # reserved by the loop: it opens the session
    enqueued = [async_record.delay(ledger, tag) for tag in ("a", "b")]
    poller = Poller(["default"])
    reserve, pending = run.aexecute, [True]

    def taken_back(ids: list[str]) -> bool:
        poller.run_once()
        return all(rqueue_redis.hget(keys().job(i), "s") == b"queued" for i in ids)

    async def late(client: Any, step: Any) -> Any:
        """The session's reserve for its free slots, whose reply comes back only after the
        poller took the jobs it reserved back (a partition, a paused process)."""
        reserved = await reserve(client, step)
        if not (isinstance(step, Command) and step.call.script == "reserve"):
            return reserved
        if pending and reserved.jobs:
            pending.clear()
            ids = [job_id for job_id, _ in reserved.jobs]
            await asyncio.to_thread(
                wait_until,
                lambda: taken_back(ids),
                timeout=10,
                interval=0.05,
                message="the poller did not take the reserved jobs back",
            )
        return reserved

    monkeypatch.setattr(run, "aexecute", late)

    run_worker(burst=True, async_concurrency=3)

    assert not pending  # the session did reserve the two for its free slots
    assert sorted(tags(ledger)) == ["a", "b", "first"]  # never under the stale reservation
    for job in enqueued:
        done = get_job(job.id)
        assert done is not None
        assert (done.status, done.attempts) == (JobStatus.SUCCEEDED, 2)  # the lost one counts


def test_async_reservations_log_a_redis_reachable_again(
    ledger: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server left out after a failure and asked again by an async fill is logged back,
    as the sync loop logs it."""
    async_record.delay(ledger, "back")
    worker = Worker(["default"], with_poller=False, async_concurrency=4)
    now = [0.0]
    worker.reserver.outages = Outages(clock=lambda: now[0])
    worker.reserver.outages.failed(location_of("default"), queue="default")
    now[0] = 60.0  # its retry time came
    runner = AsyncRunner(
        worker.reserver,
        Prefetched(worker.worker_id, None),
        None,
        worker.limits,
        worker.idle,
        None,
        slots=4,
        renew_leases=True,
    )
    started: list[str] = []
    monkeypatch.setattr(runner, "_start", lambda queue, job: started.append(job.id))

    async def fill() -> bool:
        try:
            return await runner._fill()
        finally:
            await close_async_clients()

    with caplog.at_level(logging.INFO, logger="django_rqueue.worker"):
        asyncio.run(fill())

    assert len(started) == 1
    assert any("Redis reachable again" in r.getMessage() for r in caplog.records)


def test_an_async_reserve_whose_reply_was_lost_is_sent_again_under_its_request_id(
    ledger: str, rqueue_redis: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reply of an async reserve is lost after Redis ran it: the next reserve of that
    queue sends the same request again and gets the same jobs, reserving no more."""
    ids = [async_record.delay(ledger, str(n)).id for n in range(4)]
    worker = Worker(["default"], with_poller=False, async_concurrency=4)
    sent: list[ScriptCall] = []
    real = run.aexecute

    async def lose_the_first_reply(client: Any, step: Any) -> Any:
        if not (isinstance(step, Command) and step.call.script == "reserve"):
            return await real(client, step)
        sent.append(step.call)
        reserved = await real(client, step)
        if len(sent) == 1:
            raise RedisUnavailable("connection lost before the reply")
        return reserved

    monkeypatch.setattr(run, "aexecute", lose_the_first_reply)

    async def reserve_twice() -> list[str]:
        try:
            with pytest.raises(RedisUnavailable):
                await worker.reserver.areserve("default", 2)
            jobs, _sent_at = await worker.reserver.areserve("default", 3)
            return [job_id for job_id, _fields in jobs]
        finally:
            await close_async_clients()

    got = asyncio.run(reserve_twice())

    assert len(sent) == 2 and sent[0] is sent[1]  # the same call, the same request id
    assert got == ids[:2]
    assert rqueue_redis.zcard(keys().reserved) == 2  # nothing more reserved


def test_a_slot_takes_the_next_job_while_the_last_ones_report_is_on_its_way(
    ledger: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One slot: the second job starts while the first's report is held back, and its
    coroutine still starts only after the first's ended (the slot is the coroutine's)."""
    from django_rqueue.worker.reporting import deliver_batch as real

    held: list[bool] = []

    def held_until_the_next_starts(reports: Any) -> Any:
        if not held:  # the first job's report: wait (bounded) for the second job's start
            started = lambda: bool(lines(ledger, "start", "j1"))  # noqa: E731
            try:
                wait_until(started, timeout=10, interval=0.01, message="j1 did not start")
                held.append(True)
            except AssertionError:
                held.append(False)
        return real(reports)

    monkeypatch.setattr(
        "django_rqueue.worker.async_reports.deliver_batch", held_until_the_next_starts
    )
    gate = tmp_path / "gate"
    gate.touch()  # open from the start: each job ends as soon as it starts
    jobs = [fault_async_gate.delay(ledger, f"j{n}", str(gate)) for n in range(2)]

    worker = run_worker(burst=True, async_concurrency=1)

    assert worker.processed == 2
    assert held[0], "the second job waited for the first one's report"
    order = [(e["event"], e["tag"]) for e in read_ledger(ledger) if e["event"] in ("start", "end")]
    assert order == [("start", "j0"), ("end", "j0"), ("start", "j1"), ("end", "j1")]
    for j in jobs:
        j.refresh()
        assert (j.status, j.attempts) == (JobStatus.SUCCEEDED, 1)
