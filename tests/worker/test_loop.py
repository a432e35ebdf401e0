"""The worker loop, in-process, against the real test redis-server.

Jobs write to a ledger file (``tests/jobs_app/jobs.py``) so what ran is
checked independently of what Redis records. Each in-process worker runs
under a watchdog that stops it (and fails the test) if it does not finish.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import redis
from pytest_django.fixtures import Settings as SettingsFixture

from django_rqueue import JobStatus, get_job, registry, signals
from django_rqueue.engine import run
from django_rqueue.engine.commands import Command
from django_rqueue.engine.scripts import load
from django_rqueue.exceptions import RedisUnavailable
from django_rqueue.job import Job
from django_rqueue.ops import operations
from django_rqueue.serialization import encode_arguments
from django_rqueue.worker.attempt import AttemptLifecycle
from django_rqueue.worker.hooks import AttemptOutcome
from django_rqueue.worker.loop import Worker
from django_rqueue.worker.poller import Poller
from tests.faults.proxy import FaultProxy
from tests.jobs_app.jobs import (
    chain,
    fail_always,
    fail_then_succeed,
    read_ledger,
    record,
)
from tests.support import transitions
from tests.support.inprocess import keys, poller_thread, run_to_end, run_worker, stats, tags
from tests.support.jobs_in_state import Jobs
from tests.support.redis_commands import blocked_clients
from tests.support.redis_server import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.usefixtures("worker_may_close_db_connections")


def test_an_in_process_worker_promotes_retries_with_its_own_poller_thread(
    ledger: str, rqueue_redis: redis.Redis
) -> None:
    flaky = fail_then_succeed.delay(ledger, "flaky", 1)  # its retry is scheduled 0.1 s later
    worker = Worker(["default"])  # as documented: with its poller and lease threads
    thread = threading.Thread(target=worker.run, name="test-worker", daemon=True)
    before = {t.name for t in threading.enumerate()}
    thread.start()

    def succeeded() -> Job[Any] | None:
        job = get_job(flaky.id)
        return job if job is not None and job.status is JobStatus.SUCCEEDED else None

    try:
        done = wait_until(succeeded, timeout=10, message="the retry was never promoted and run")
    finally:
        worker.request_stop()
        rqueue_redis.rpush(keys().notify, "1")  # wake it from its idle wait
        thread.join(15)
    assert not thread.is_alive()
    assert done is not None and done.attempts == 2
    assert [e["run"] for e in read_ledger(ledger)] == [1, 2]
    # Its poller thread ended with it (lease threads end once their job did):
    # nothing of this worker touches the next test's Redis data.
    assert "rqueue-poller" not in {t.name for t in threading.enumerate()}
    wait_until(lambda: {t.name for t in threading.enumerate()} <= before, message="threads left")


def test_burst_worker_runs_queued_jobs_and_records_results(
    ledger: str, rqueue_redis: redis.Redis
) -> None:
    jobs = [record.delay(ledger, tag) for tag in ("a", "b", "c")]

    worker = run_worker(burst=True)

    assert worker.processed == 3
    assert tags(ledger) == ["a", "b", "c"]  # FIFO
    for enqueued, tag in zip(jobs, ("a", "b", "c"), strict=True):
        done = get_job(enqueued.id)
        assert done is not None
        assert done.status is JobStatus.SUCCEEDED
        assert done.result == tag
        assert done.attempts == 1
        assert done.error is None and done.errors == []
        assert done.started_at is not None and done.finished_at is not None
        assert done.finished_at >= done.started_at
        assert rqueue_redis.ttl(keys().job(done.id)) > 0  # terminal record expires
    assert stats(rqueue_redis).get("succeeded") == 3
    assert rqueue_redis.zcard(keys().reserved) == 0
    assert rqueue_redis.zcard(keys().prios) == 0


def test_failing_job_retries_with_backoff_then_lands_in_failed_store(
    ledger: str, rqueue_redis: redis.Redis
) -> None:
    enqueued = fail_always.delay(ledger, "x")  # max_attempts=3, backoff 0.1 s * attempt

    with poller_thread():
        run_worker(max_jobs=3)

    runs = [e for e in read_ledger(ledger) if e["tag"] == "x"]
    assert len(runs) == 3
    # Each retry waited at least its backoff (0.1 s, then 0.2 s) after the previous
    # run (less 2 ms: Redis schedules in whole milliseconds).
    assert runs[1]["t"] - runs[0]["t"] >= 0.1 - 0.002
    assert runs[2]["t"] - runs[1]["t"] >= 0.2 - 0.002
    job = get_job(enqueued.id)
    assert job is not None
    assert job.status is JobStatus.FAILED
    assert job.attempts == 3
    assert job.error is not None
    assert job.error["type"] == "builtins.RuntimeError"
    assert job.error["message"] == "boom x"
    assert "Traceback (most recent call last)" in job.error["traceback"]
    assert "in fail_always" in job.error["traceback"]
    assert "RuntimeError: boom x" in job.error["traceback"]
    assert [e["type"] for e in job.errors] == ["builtins.RuntimeError"] * 3
    assert rqueue_redis.zscore(keys().failed, enqueued.id) is not None
    assert rqueue_redis.zcard(keys().delayed) == 0
    assert stats(rqueue_redis).get("failed") == 1


def test_flaky_job_succeeds_on_a_later_attempt(ledger: str) -> None:
    enqueued = fail_then_succeed.delay(ledger, "f", 2)

    with poller_thread():
        worker = run_worker(max_jobs=3)

    job = get_job(enqueued.id)
    assert job is not None
    assert job.status is JobStatus.SUCCEEDED
    assert job.attempts == 3
    assert job.result == 3
    # Each failed attempt's error names its worker; the success keeps the worker field.
    assert [e["worker"] for e in job.errors] == [worker.worker_id] * 2
    assert job.worker == worker.worker_id
    assert [e["message"] for e in job.errors] == ["flaky f run 1", "flaky f run 2"]
    assert len(tags(ledger)) == 3


@pytest.mark.parametrize("order", [("emails", "low"), ("low", "emails")])
def test_queues_are_served_in_strict_order(ledger: str, order: tuple[str, str]) -> None:
    for n in range(4):  # interleaved on purpose
        record.using(queue="low").delay(ledger, f"low{n}")
        record.using(queue="emails").delay(ledger, f"emails{n}")

    run_worker(order, burst=True)

    first, second = order
    assert tags(ledger) == [f"{first}{n}" for n in range(4)] + [f"{second}{n}" for n in range(4)]


def test_job_arriving_on_an_earlier_queue_goes_before_the_rest_of_a_later_one(
    ledger: str,
) -> None:
    chain.using(queue="low").delay(ledger, "low0", "emails", "emails-new")
    record.using(queue="low").delay(ledger, "low1")

    run_worker(["emails", "low"], burst=True)

    assert tags(ledger) == ["low0", "emails-new", "low1"]


def test_max_jobs_stops_the_worker(ledger: str, rqueue_redis: redis.Redis) -> None:
    for n in range(5):
        record.delay(ledger, str(n))

    worker = run_worker(max_jobs=2)

    assert worker.processed == 2
    assert tags(ledger) == ["0", "1"]
    assert stats(rqueue_redis)["queued"] == 3


def test_burst_exits_when_nothing_is_queued_or_running_and_leaves_scheduled_jobs(
    ledger: str,
) -> None:
    now = record.delay(ledger, "now")
    later = record.using(delay=60).delay(ledger, "later")

    worker = run_worker(burst=True)

    assert worker.processed == 1
    assert tags(ledger) == ["now"]
    assert get_job(now.id).status is JobStatus.SUCCEEDED  # type: ignore[union-attr]
    assert get_job(later.id).status is JobStatus.SCHEDULED  # type: ignore[union-attr]


def test_burst_serves_the_other_queues_and_exits_leaving_a_paused_queues_jobs(
    ledger: str,
) -> None:
    operations.pause_queue("emails")
    held = record.using(queue="emails").delay(ledger, "held")
    record.using(queue="low").delay(ledger, "low")

    worker = run_worker(["emails", "low"], burst=True, limit=10)

    assert worker.processed == 1
    assert tags(ledger) == ["low"]
    assert get_job(held.id).status is JobStatus.QUEUED  # type: ignore[union-attr]


def test_burst_on_empty_queues_exits_at_once() -> None:
    started = time.monotonic()
    worker = run_worker(burst=True, limit=10)
    assert worker.processed == 0
    assert time.monotonic() - started < 5


def test_a_success_is_acked_together_with_the_next_reservation(
    ledger: str, rqueue_redis: redis.Redis
) -> None:
    for n in range(10):
        record.delay(ledger, str(n))
    for name in ("reserve", "ack_reserve"):  # no NOSCRIPT retries in the count
        load(name).ensure_loaded(rqueue_redis)
    rqueue_redis.config_resetstat()
    hooks = RecordingHooks()

    run_worker(burst=True, hooks=hooks)  # as a supervisor's child

    assert tags(ledger) == [str(n) for n in range(10)]
    assert stats(rqueue_redis)["succeeded"] == 10
    calls = rqueue_redis.info("commandstats")["cmdstat_evalsha"]["calls"]
    # reserve, then 10 x ack_reserve (the last finds nothing), then one empty
    # reserve before the burst ends: 12 round trips, not 21.
    assert calls <= 12, calls
    # The master hears of each next job as soon as it is reserved (before the
    # previous job's "end": it renews the lease of a held job), then when it starts.
    assert [e[1] for e in hooks.events if e[0] == "start"] == [
        e[1] for e in hooks.events if e[0] == "end"
    ]
    assert [e[1] for e in hooks.events if e[0] == "hold"] == [
        e[1] for e in hooks.events if e[0] == "start"
    ][1:]
    events = [e[0] for e in hooks.events]
    assert events[:5] == ["start", "hold", "end", "start", "hold"]


class RecordingHooks:
    """Worker hooks that record ``("hold" | "start" | "end", job id)`` in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def prefetched(self, queue: str, jobs: Sequence[Job[Any]]) -> None:
        self.events += [("hold", job.id) for job in jobs]

    def flush(self) -> None:
        pass

    def started(self, queue: str, job: Job[Any]) -> None:
        self.events.append(("start", job.id))

    def finished(self, job: Job[Any], outcome: str) -> None:
        self.events.append(("end", job.id))


def test_receivers_of_job_succeeded_run_before_the_next_job_is_reserved(
    ledger: str, rqueue_redis: redis.Redis
) -> None:
    for n in range(3):
        record.delay(ledger, str(n))
    running_during_receiver: list[int] = []

    def receiver(sender: object, **kwargs: object) -> None:
        running_during_receiver.append(rqueue_redis.zcard(keys().reserved))

    signals.job_succeeded.connect(receiver, weak=False)
    try:
        run_worker(burst=True)
    finally:
        signals.job_succeeded.disconnect(receiver)

    assert tags(ledger) == ["0", "1", "2"]
    # No lease of a next job ticks while a (maybe slow) receiver runs.
    assert running_during_receiver == [0, 0, 0]


class StopAfterPrefetch(Worker):
    """A worker whose stop request arrives during its first ack_reserve round trip."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        worker = self

        class Attempts(AttemptLifecycle):
            def report(self, *args: Any, **kwargs: Any) -> AttemptOutcome:
                outcome = super().report(*args, **kwargs)
                if worker._prefetched:
                    worker.request_stop()
                return outcome

        self.attempts = Attempts(
            self.reserver,
            self._prefetched,
            self.hooks,
            self.limits,
            self.cancel_fd,
            renew_leases=self.renew_leases,
        )


class StopDuringReserve(Worker):
    """A worker whose stop request arrives while its reserve call finds nothing (a busy
    child is not interrupted: the signal handler only sets ``stopping``)."""

    waits = 0

    def work_once(self) -> bool:
        found = super().work_once()
        self.request_stop()
        return found

    def _wait_for_work(self) -> None:
        self.waits += 1
        super()._wait_for_work()


def test_a_stop_that_arrives_while_reserving_is_obeyed_before_the_idle_wait(
    rqueue_redis: redis.Redis,
) -> None:
    worker = StopDuringReserve(["default"], with_poller=False)

    assert worker.run() == 0

    assert worker.waits == 0  # no blocking wait of up to IDLE_BLOCK seconds first


def test_a_job_reserved_with_the_ack_is_handed_back_when_a_stop_comes_in_between(
    ledger: str, rqueue_redis: redis.Redis
) -> None:
    first = record.delay(ledger, "first")
    second = record.delay(ledger, "second")
    hooks = RecordingHooks()
    worker = StopAfterPrefetch(["default"], with_poller=False, hooks=hooks, burst=True)

    assert worker.run() == 0

    assert tags(ledger) == ["first"]
    handed_back = get_job(second.id)
    assert handed_back is not None
    assert handed_back.status is JobStatus.QUEUED
    assert handed_back.attempts == 0  # no attempt spent
    assert handed_back.token == 2  # the prefetching reservation is fenced off
    assert rqueue_redis.zcard(keys().reserved) == 0
    assert stats(rqueue_redis)["queued"] == 1
    # Announced to the master when reserved, then closed (as released).
    assert hooks.events == [
        ("start", first.id),
        ("hold", second.id),
        ("end", first.id),
        ("end", second.id),
    ]


def test_a_job_held_past_a_third_of_its_lease_is_skipped_if_its_lease_was_lost(
    ledger: str, rqueue_redis: redis.Redis
) -> None:
    lost = record.delay(ledger, "lost")
    kept = record.delay(ledger, "kept")
    hooks = RecordingHooks()
    worker = Worker(["default"], with_poller=False, hooks=hooks, worker_id="w-held")
    reserved = transitions.reserve_many(
        rqueue_redis, keys(), lease_ms=60_000, worker_id="w-held", count=2
    )
    worker._prefetched.add(
        "default",
        [Job.from_fields(job_id, fields) for job_id, fields in reserved.jobs],
        since=time.monotonic() - 3600,  # held far longer than a third of a lease
    )
    rqueue_redis.hset(keys().job(lost.id), "token", 7)  # reclaimed and handed to someone else

    assert worker.work_once()

    assert tags(ledger) == ["kept"]  # the lost one never ran here
    assert ("end", lost.id) in hooks.events  # the master stops renewing it
    assert rqueue_redis.hget(keys().job(lost.id), "token") == b"7"
    assert get_job(kept.id).status is JobStatus.SUCCEEDED  # type: ignore[union-attr]


def test_a_held_job_whose_lease_check_meets_an_outage_stays_held_and_runs_after_it(
    ledger: str, rqueue_redis: redis.Redis, redis_server: RedisServer, settings: SettingsFixture
) -> None:
    held = record.delay(ledger, "held")
    hooks = RecordingHooks()
    worker = Worker(["default"], with_poller=False, hooks=hooks, worker_id="w-held")
    ((job_id, fields),) = transitions.reserve_many(
        rqueue_redis, keys(), lease_ms=60_000, worker_id="w-held", count=1
    ).jobs
    worker._prefetched.add(
        "default",
        [Job.from_fields(job_id, fields)],
        since=time.monotonic() - 3600,  # its lease is checked before it runs
    )
    with FaultProxy(redis_server.port) as proxy:
        settings.RQUEUE = {**settings.RQUEUE, "REDIS_URL": proxy.url()}
        proxy.set_mode("refuse")
        with pytest.raises(RedisUnavailable):
            worker.work_once()
        assert [job.id for _, job in worker._prefetched] == [held.id]  # not dropped
        proxy.set_mode("pass")
        assert worker.work_once()
    assert tags(ledger) == ["held"]
    assert rqueue_redis.hget(keys().job(held.id), "s") == b"succeeded"


def reclaimed_meanwhile[**P, R](reserving: Callable[P, R], client: redis.Redis) -> Callable[P, R]:
    """``reserving`` (a transition that reserves jobs) whose first reply arrives late.

    Redis applies the call at once; the worker hears back only after the
    leases of the jobs it reserved ran out and a poller took them back, as
    when the worker is paused between request and reply (SIGSTOP, a VM
    freeze) or the network holds the reply longer than a lease.
    """
    poller = Poller(["default"])
    first = [True]

    def late(*args: P.args, **kwargs: P.kwargs) -> R:
        reply = reserving(*args, **kwargs)
        if first:
            first.clear()
            wait_until(
                lambda: poller.run_once() is not None and client.zcard(keys().reserved) == 0,
                timeout=10,
                interval=0.05,
                message="the poller did not take the reserved jobs back",
            )
        return reply

    return late


def late_for(script: str, client: redis.Redis) -> Callable[..., Any]:
    """``run.execute`` whose first reply to a ``<script>.lua`` call arrives late
    (:func:`reclaimed_meanwhile`); every other command runs as usual."""
    real = run.execute
    late = reclaimed_meanwhile(real, client)

    def execute(redis_client: Any, step: Any, *args: Any) -> Any:
        if isinstance(step, Command) and step.call.script == script:
            return late(redis_client, step, *args)
        return real(redis_client, step, *args)

    return execute


@pytest.mark.parametrize("batch", [False, True], ids=["one", "batch"])
def test_jobs_whose_reserve_reply_came_back_after_their_lease_ran_out_are_not_run(
    ledger: str,
    rqueue_redis: redis.Redis,
    settings: SettingsFixture,
    monkeypatch: pytest.MonkeyPatch,
    batch: bool,
) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "LEASE": 1}
    enqueued = [record.delay(ledger, tag) for tag in ("a", "b")]
    hooks = RecordingHooks() if batch else None
    worker = Worker(["default"], with_poller=False, hooks=hooks, burst=True)
    if batch:  # reserve both in one round trip: the first one runs at once, b is held
        worker.reserver.quiet["default"], worker.reserver.run_times["default"] = True, 0.001
    monkeypatch.setattr(run, "execute", late_for("reserve", rqueue_redis))

    assert worker.run() == 0

    assert sorted(tags(ledger)) == ["a", "b"]  # once each: never under the stale reservation
    stale = {job.id for job in (enqueued if batch else enqueued[:1])}  # what the slow call got
    for job in enqueued:
        done = get_job(job.id)
        assert done is not None
        assert done.status is JobStatus.SUCCEEDED
        lost = ["django_rqueue.exceptions.LeaseExpired"] if job.id in stale else []
        assert [e["type"] for e in done.errors] == lost
        assert done.attempts == 1 + len(lost)  # the attempt whose lease ran out counts
    if hooks is not None:
        a, b = (job.id for job in enqueued)
        assert sorted(e for e in hooks.events if e[0] == "start") == sorted(
            [("start", a), ("start", b)]
        )
        assert hooks.events[:2] == [("hold", b), ("end", b)]  # the stale hold, released


def test_a_job_reserved_with_an_ack_whose_reply_came_back_after_its_lease_is_not_run(
    ledger: str,
    rqueue_redis: redis.Redis,
    settings: SettingsFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "LEASE": 1}
    first, second = record.delay(ledger, "first"), record.delay(ledger, "second")
    hooks = RecordingHooks()
    worker = Worker(["default"], with_poller=False, hooks=hooks, burst=True)
    monkeypatch.setattr(run, "execute", late_for("ack_reserve", rqueue_redis))

    assert worker.run() == 0

    assert tags(ledger) == ["first", "second"]  # second once: not under the stale reservation
    assert get_job(first.id).attempts == 1  # type: ignore[union-attr]
    done = get_job(second.id)
    assert done is not None
    assert done.status is JobStatus.SUCCEEDED
    assert done.attempts == 2  # the attempt whose lease ran out counts
    assert [e for e in hooks.events if e[0] == "start"] == [
        ("start", first.id),
        ("start", second.id),
    ]
    # Held with the ack's reply, then handed back to the master as released.
    assert hooks.events[:4] == [
        ("start", first.id),
        ("hold", second.id),
        ("end", first.id),
        ("end", second.id),
    ]


class Orchestra:
    """Steps run in a thread beside a worker that runs in the main thread (whose signal
    handlers only the main thread runs); an exception is kept for the test to raise."""

    def __init__(self, steps: Callable[[], None]) -> None:
        self.error: BaseException | None = None

        def run() -> None:
            try:
                steps()
            except BaseException as exc:  # handed to the test
                self.error = exc

        self.thread = threading.Thread(target=run, name="test-orchestra", daemon=True)
        self.thread.start()

    def join(self) -> None:
        self.thread.join(10)
        assert not self.thread.is_alive(), "the steps did not end"
        if self.error is not None:
            raise self.error


def enqueue_directly(client: redis.Redis, ledger: str, tag: str) -> str:
    """Enqueue ``record(ledger, tag)`` on ``client`` (the real server, past any proxy)."""
    payload = encode_arguments([ledger, tag], {})
    return Jobs(client).enqueue(payload=payload, max_attempts=3)[1]


def test_a_stop_signal_during_the_childs_start_up_ends_it_cleanly_before_any_job(
    ledger: str, rqueue_redis: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A supervised child installs its stop handler before it starts serving; the master may
    # stop it at once (rqueue_work got SIGTERM just after forking a replacement).
    job_id = enqueue_directly(rqueue_redis, ledger, "not run")
    worker = Worker(["default"], with_poller=False, hooks=RecordingHooks())
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)}
    real_autodiscover = registry.autodiscover

    def autodiscover() -> None:
        signal.raise_signal(signal.SIGUSR1)  # the handler runs here, mid start-up
        real_autodiscover()

    monkeypatch.setattr(registry, "autodiscover", autodiscover)
    worker.install_child_signal_handlers()
    try:
        assert worker.run() == 0
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)
    assert worker.stopping
    assert worker.processed == 0
    job = get_job(job_id)
    assert job is not None and job.status is JobStatus.QUEUED
    assert tags(ledger) == []


def test_a_reserve_sent_behind_the_idle_blpop_whose_reply_a_stop_signal_cut_off_is_handed_back(
    ledger: str,
    rqueue_redis: redis.Redis,
    redis_server: RedisServer,
    settings: SettingsFixture,
) -> None:
    hooks = RecordingHooks()
    worker = Worker(["default"], with_poller=False, hooks=hooks)
    enqueued: list[str] = []
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)}
    with FaultProxy(redis_server.port) as proxy:
        settings.RQUEUE = {**settings.RQUEUE, "REDIS_URL": proxy.url()}

        def steps() -> None:
            wait_until(lambda: blocked_clients(rqueue_redis) == 1)  # idle, reserve queued
            proxy.set_mode("hold_replies")
            enqueued.append(enqueue_directly(rqueue_redis, ledger, "picked"))
            wait_until(lambda: rqueue_redis.zcard(keys().reserved) == 1)  # the reserve ran
            # A supervised child's stop: its handler raises in the wait, the reply unread.
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGUSR1)
            wait_until(lambda: worker.stopping)
            proxy.set_mode("pass")

        worker.install_child_signal_handlers()
        try:
            orchestra = Orchestra(steps)
            assert worker.run() == 0
            orchestra.join()
        finally:
            for signum, handler in saved.items():
                signal.signal(signum, handler)
        (job_id,) = enqueued
        handed_back = get_job(job_id)

    assert handed_back is not None
    assert handed_back.status is JobStatus.QUEUED
    assert handed_back.attempts == 0  # no attempt spent
    assert rqueue_redis.zcard(keys().reserved) == 0
    assert tags(ledger) == []
    # The same request sent again returned the job, which was then handed back.
    assert hooks.events == [("hold", job_id), ("end", job_id)]


def test_a_reserve_sent_behind_the_idle_blpop_whose_reply_was_lost_gets_the_same_job_again(
    ledger: str,
    rqueue_redis: redis.Redis,
    redis_server: RedisServer,
    settings: SettingsFixture,
) -> None:
    worker = Worker(["default"], with_poller=False, max_jobs=1)
    enqueued: list[str] = []
    with FaultProxy(redis_server.port) as proxy:
        settings.RQUEUE = {**settings.RQUEUE, "REDIS_URL": proxy.url()}

        def steps() -> None:
            wait_until(lambda: blocked_clients(rqueue_redis) == 1)
            proxy.set_mode("hold_replies")
            enqueued.append(enqueue_directly(rqueue_redis, ledger, "picked"))
            wait_until(lambda: rqueue_redis.zcard(keys().reserved) == 1)
            proxy.reset_all()  # the reserve ran; its reply is lost with the connection
            proxy.set_mode("pass")

        orchestra = Orchestra(steps)
        run_to_end(worker)
        orchestra.join()
        (job_id,) = enqueued
        done = get_job(job_id)

    assert tags(ledger) == ["picked"]
    assert done is not None
    assert done.status is JobStatus.SUCCEEDED
    assert done.attempts == 1  # the reservation that ran in Redis, not a second one
    assert done.token == 1


def test_a_reserve_sent_behind_the_idle_blpop_after_redis_lost_its_scripts_is_sent_again(
    ledger: str, rqueue_redis: redis.Redis
) -> None:
    worker = Worker(["default"], with_poller=False, max_jobs=1)

    def steps() -> None:
        wait_until(lambda: blocked_clients(rqueue_redis) == 1)
        rqueue_redis.script_flush()  # the EVALSHA queued behind the BLPOP gets NOSCRIPT
        record.delay(ledger, "after-flush")

    orchestra = Orchestra(steps)
    run_to_end(worker)
    orchestra.join()
    assert tags(ledger) == ["after-flush"]


@pytest.mark.parametrize("batch", [False, True], ids=["one", "batch"])
def test_jobs_of_an_idle_pickup_whose_reply_came_back_after_their_lease_are_not_run(
    ledger: str,
    rqueue_redis: redis.Redis,
    settings: SettingsFixture,
    monkeypatch: pytest.MonkeyPatch,
    batch: bool,
) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "LEASE": 1}
    enqueued = [record.delay(ledger, tag) for tag in ("a", "b")]
    hooks = RecordingHooks() if batch else None
    worker = Worker(["default"], with_poller=False, hooks=hooks, burst=True)
    if batch:  # the pickup reserves both: the first one runs at once, b is held
        worker.reserver.quiet["default"], worker.reserver.run_times["default"] = True, 0.001
    # The reserve sent behind the idle BLPOP runs at once (a wake-up token is there);
    # its reply is read only after the poller took the reserved jobs back.
    load("reserve").ensure_loaded(rqueue_redis)  # applied, not answered NOSCRIPT
    late = reclaimed_meanwhile(worker.idle.wait_then, rqueue_redis)
    monkeypatch.setattr(worker.idle, "wait_then", late)
    worker._wait_for_work()
    assert worker.reserver.pickup is not None and worker.reserver.pickup.reply is not None

    assert worker.run() == 0

    assert sorted(tags(ledger)) == ["a", "b"]  # once each: never under the stale reservation
    stale = {job.id for job in (enqueued if batch else enqueued[:1])}  # what the pickup got
    for job in enqueued:
        done = get_job(job.id)
        assert done is not None
        assert done.status is JobStatus.SUCCEEDED
        assert done.attempts == (2 if job.id in stale else 1)  # the lost attempt counts
