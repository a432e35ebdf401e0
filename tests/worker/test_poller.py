"""The poller, in-process: promotion of due jobs, reclaiming of expired leases, races, and
the failed store's retention."""

from __future__ import annotations

import datetime
import threading
import time
from collections import Counter
from typing import Any

import pytest
import redis

from django_rqueue import Job, JobStatus, get_job
from django_rqueue.conf import get_config
from django_rqueue.engine import commands
from django_rqueue.engine.calls import TRIM_LIMIT, Retention
from django_rqueue.engine.commands import Command
from django_rqueue.engine.connection import get_client
from django_rqueue.engine.keys import pollers_key
from django_rqueue.engine.replies import Promoted, Reply
from django_rqueue.execution import error_record
from django_rqueue.worker.poller import MAX_SLEEP, Poller
from tests.jobs_app.jobs import read_ledger, record
from tests.support import transitions
from tests.support.inprocess import keys, poller_thread, queued_ids, run_worker, stats
from tests.support.jobs_in_state import Jobs
from tests.support.waiting import wait_until

pytestmark = pytest.mark.usefixtures("worker_may_close_db_connections")


def blocked_clients(client: redis.Redis) -> int:
    """Connections currently blocked in BLPOP (idle workers and sleeping pollers)."""
    return sum(1 for c in client.client_list() if c.get("cmd") == "blpop")


def test_delayed_jobs_start_at_or_after_run_at_in_due_order(ledger: str) -> None:
    delays = {"c": 0.9, "a": 0.3, "b": 0.6}
    jobs = {tag: record.using(delay=d).delay(ledger, tag) for tag, d in delays.items()}
    for job in jobs.values():
        assert job.status is JobStatus.SCHEDULED

    with poller_thread():
        run_worker(max_jobs=3)

    runs = {e["tag"]: e["t"] for e in read_ledger(ledger)}
    assert [e["tag"] for e in read_ledger(ledger)] == ["a", "b", "c"]
    for tag, job in jobs.items():
        done = get_job(job.id)
        assert done is not None and done.status is JobStatus.SUCCEEDED
        assert done.run_at is not None
        lateness = runs[tag] - done.run_at.timestamp()
        print(f"{tag}: started {lateness * 1000:.1f} ms after run_at")
        assert lateness >= 0, f"{tag} started {-lateness:.3f} s before its run_at"


def test_run_at_is_honoured(ledger: str) -> None:
    when = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=0.5)
    job = record.using(run_at=when).delay(ledger, "at")

    with poller_thread():
        run_worker(max_jobs=1)

    done = get_job(job.id)
    assert done is not None and done.run_at is not None
    assert abs(done.run_at.timestamp() - when.timestamp()) < 0.002
    assert read_ledger(ledger)[0]["t"] >= done.run_at.timestamp()  # ms precision


def test_poller_wakes_early_when_an_earlier_job_is_scheduled(
    ledger: str, rqueue_redis: redis.Redis
) -> None:
    record.using(delay=3600).delay(ledger, "far")
    with poller_thread():
        # The poller has looked, found nothing due for an hour, and sleeps.
        wait_until(lambda: blocked_clients(rqueue_redis) >= 1, message="poller not sleeping")
        near = record.using(delay=0.2).delay(ledger, "near")
        started = time.monotonic()
        wait_until(
            lambda: get_job(near.id).status is JobStatus.QUEUED,  # type: ignore[union-attr]
            timeout=MAX_SLEEP - 1.5,
            message="the poller slept through an earlier job",
        )
        print(f"promoted {time.monotonic() - started:.3f} s after scheduling (due at 0.2 s)")


@pytest.mark.parametrize(("max_attempts", "expected"), [(3, "queued"), (1, "failed")])
def test_poller_reclaims_an_expired_lease(
    ledger: str, rqueue_redis: redis.Redis, max_attempts: int, expected: str
) -> None:
    job = record.using(max_attempts=max_attempts).delay(ledger, "lost")
    # A worker reserves it with a 200 ms lease and then dies (never renews).
    reserved = transitions.reserve(get_client("default"), keys(), lease_ms=200, worker_id="dead")
    assert reserved is not None and reserved[0] == job.id

    with poller_thread():

        def reclaimed() -> Job[Any] | None:
            found = get_job(job.id)
            return found if found is not None and found.status == expected else None

        found = wait_until(reclaimed, timeout=5, message=f"not {expected} after the lease expired")

    assert found is not None
    assert found.attempts == 1  # the lost attempt counted
    assert found.error is not None
    assert found.error["type"] == "django_rqueue.exceptions.LeaseExpired"
    assert "lease expired" in found.error["message"]
    assert rqueue_redis.zcard(keys().reserved) == 0
    assert read_ledger(ledger) == []


def test_two_pollers_racing_promote_5000_due_jobs_exactly_once(
    ledger: str, rqueue_redis: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    total = 5000
    ids = [record.using(delay=0.001).delay(ledger, str(n)).id for n in range(total)]
    k = keys()
    assert rqueue_redis.zcard(k.delayed) == total

    def due_now() -> bool:
        seconds, micros = rqueue_redis.time()
        return bool(rqueue_redis.zcount(k.delayed, 0, seconds * 1000 + micros // 1000) == total)

    wait_until(due_now, timeout=5, message="jobs not yet due")

    # Count what each poller promoted (the real script runs; this only tallies replies).
    promoted: Counter[str] = Counter()
    real_promote = commands.promote_round
    lock = threading.Lock()

    def counting_promote(*args: Any, **kwargs: Any) -> Command[Promoted]:
        command = real_promote(*args, **kwargs)

        def parse(reply: Reply) -> Promoted:
            result = command.parse(reply)
            with lock:
                promoted[threading.current_thread().name] += result.promoted
            return result

        return command._replace(parse=parse)

    monkeypatch.setattr(commands, "promote_round", counting_promote)
    barrier = threading.Barrier(2)
    pollers = [Poller(["default"], batch=50) for _ in range(2)]

    def race(poller: Poller) -> None:
        barrier.wait()
        poller.run()

    threads = [
        threading.Thread(target=race, args=(p,), name=f"poller-{n}", daemon=True)
        for n, p in enumerate(pollers)
    ]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: rqueue_redis.zcard(k.delayed) == 0, timeout=30)
    finally:
        for poller in pollers:
            poller.stop.set()
        rqueue_redis.rpush(k.wake, "1", "1")
        for thread in threads:
            thread.join(10)
    assert not any(t.is_alive() for t in threads)

    print(f"promoted per poller: {dict(promoted)}")
    assert sum(promoted.values()) == total
    queued = queued_ids(rqueue_redis)
    assert len(queued) == total
    assert Counter(queued) == Counter(ids)  # every id exactly once
    assert stats(rqueue_redis)["queued"] == total
    assert rqueue_redis.zcard(k.delayed) == 0
    assert rqueue_redis.lrange(k.ring(0), 0, -1) == [b""]  # the default group, once
    pipe = rqueue_redis.pipeline(transaction=False)
    for job_id in ids:
        pipe.hget(k.job(job_id), "s")
    assert set(pipe.execute()) == {b"queued"}


def test_a_poller_records_its_rounds_in_the_pollers_zset_at_most_every_beat(
    rqueue_redis: redis.Redis,
) -> None:
    key = pollers_key(get_config().key_prefix)
    rqueue_redis.zadd(key, {"gone-an-hour-ago": 1})
    poller = Poller(["default"])
    poller.run_once()
    seconds, micros = rqueue_redis.time()
    recorded = rqueue_redis.zscore(key, poller.id)
    assert recorded is not None and 0 <= seconds * 1000 + micros // 1000 - recorded < 5000
    assert rqueue_redis.zscore(key, "gone-an-hour-ago") is None  # silent for an hour: dropped
    rqueue_redis.zadd(key, {poller.id: 1})
    poller.run_once()  # within BEAT of the last record: no write
    assert rqueue_redis.zscore(key, poller.id) == 1


def _retention(settings: Any, **options: int | None) -> None:
    queues = {**settings.RQUEUE["QUEUES"], "default": options}
    settings.RQUEUE = {**settings.RQUEUE, "QUEUES": queues}


def test_a_round_deletes_failed_jobs_past_failed_ttl_with_no_new_failure(
    settings: Any, rqueue_redis: redis.Redis, jobs: Jobs
) -> None:
    old, recent = jobs.failed(), jobs.failed()
    rqueue_redis.zadd(keys().failed, {old: 1_000})  # failed in 1970
    _retention(settings, failed_ttl=3600)
    Poller(["default"]).run_once()
    assert get_job(old) is None
    assert get_job(recent) is not None
    assert stats(rqueue_redis)["trimmed"] == 1


def test_a_backlog_is_deleted_over_several_rounds_then_once_every_trim_every_seconds(
    settings: Any, rqueue_redis: redis.Redis, jobs: Jobs
) -> None:
    ids = [jobs.failed() for _ in range(TRIM_LIMIT + 20)]
    _retention(settings, failed_max=10)
    poller = Poller(["default"])
    assert poller.run_once() == 0  # a full call: the next round comes at once
    assert rqueue_redis.zcard(keys().failed) == len(ids) - TRIM_LIMIT
    assert poller.run_once() > 0
    assert rqueue_redis.zcard(keys().failed) == 10
    # Failures let in by another retention (older settings, say) wait for the
    # poller's next retention round, TRIM_EVERY (60) seconds later.
    keep = Retention(None, None)
    for _ in range(5):
        job_id = jobs.running()
        error = error_record(ValueError("x"))
        transitions.fail(rqueue_redis, keys(), job_id, 1, error, -1, retention=keep)
    poller.run_once()
    assert rqueue_redis.zcard(keys().failed) == 15
