"""The scheduler, in-process (django_rqueue.worker.scheduler): first tick, catch-up, pause, cost.

The exactly-once claims across real processes (two workers and two pollers,
kill -9 mid-tick) are in tests/faults/test_schedule.py; the tick arithmetic
(cron, DST) in tests/periodic/test_entries.py.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
import redis
from pytest_django.fixtures import Settings as SettingsFixture

from django_rqueue import RedisUnavailable, get_job
from django_rqueue.engine.keys import QueueKeys
from django_rqueue.periodic import runtime
from django_rqueue.worker.poller import Poller
from django_rqueue.worker.scheduler import Scheduler
from tests.support.inprocess import poller_thread, run_worker
from tests.support.waiting import wait_until

KEYS = QueueKeys.of("rqueue", "default")
RECORD = "tests.jobs_app.jobs.record"


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _schedule(settings: SettingsFixture, schedule: dict[str, Any]) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "SCHEDULE": schedule}


def _now_ms(client: redis.Redis) -> int:
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def _entry_jobs(client: redis.Redis, name: str = RECORD) -> list[tuple[int, str]]:
    """``(run-at ms, id)`` of every job of ``name`` in Redis, by run-at."""
    found = []
    for key in client.scan_iter(match=f"{KEYS.base}job:*", count=1000):
        due, at, job_name = client.hmget(key, ["due", "at", "n"])
        if job_name is not None and _text(job_name) == name:
            job_id = _text(key).removeprefix(f"{KEYS.base}job:")
            found.append((int(due or at or 0), job_id))
    return sorted(found)


def _next_tick(client: redis.Redis, entry: str) -> int:
    score = client.zscore(KEYS.schedule, entry)
    assert score is not None
    return int(score)


def test_a_new_entry_first_runs_at_its_next_tick(
    settings: SettingsFixture, rqueue_redis: redis.Redis, ledger: str
):
    _schedule(settings, {"e": {"job": RECORD, "every": 3600, "args": [ledger, "e"]}})
    before = _now_ms(rqueue_redis)
    sleep = Scheduler(["default"]).run_once()
    assert _entry_jobs(rqueue_redis) == []
    tick = _next_tick(rqueue_redis, "e")
    assert tick % 3_600_000 == 0
    assert before < tick <= before + 3_600_000
    assert sleep is not None and 0 < sleep <= 3600


def test_missed_ticks_give_one_catch_up_run_for_the_first_missed_tick(
    settings: SettingsFixture, rqueue_redis: redis.Redis, ledger: str
):
    _schedule(settings, {"e": {"job": RECORD, "every": 60, "args": [ledger, "e"]}})
    scheduler = Scheduler(["default"])
    scheduler.run_once()
    # Nothing ran for an hour: the stored next tick is 60 ticks old.
    now = _now_ms(rqueue_redis)
    missed = (now // 60_000 - 60) * 60_000
    rqueue_redis.zadd(KEYS.schedule, {"e": missed})

    scheduler.run_once()
    scheduler.run_once()

    jobs = _entry_jobs(rqueue_redis)
    assert [run_at for run_at, _ in jobs] == [missed]
    job = get_job(jobs[0][1])
    assert job is not None and job.run_at is not None
    assert int(job.run_at.timestamp() * 1000) == missed
    assert job.args == [ledger, "e"]
    next_tick = _next_tick(rqueue_redis, "e")
    assert next_tick > now
    assert next_tick % 60_000 == 0
    assert next_tick - now <= 60_000


def test_a_tick_read_by_two_schedulers_is_enqueued_once(
    settings: SettingsFixture, rqueue_redis: redis.Redis, ledger: str
):
    _schedule(settings, {"e": {"job": RECORD, "every": 60, "args": [ledger, "e"]}})
    first, second = Scheduler(["default"]), Scheduler(["default"])
    first.run_once()
    second.run_once()
    tick = (_now_ms(rqueue_redis) // 60_000) * 60_000
    rqueue_redis.zadd(KEYS.schedule, {"e": tick})
    first.run_once()
    second.run_once()
    assert [run_at for run_at, _ in _entry_jobs(rqueue_redis)] == [tick]


def test_the_entrys_options_override_the_jobs_and_the_job_enqueued_signal_fires(
    settings: SettingsFixture, rqueue_redis: redis.Redis, ledger: str, events: list[Any]
):
    _schedule(
        settings,
        {
            "e": {
                "job": RECORD,
                "every": 60,
                "args": [ledger],
                "kwargs": {"tag": "k"},
                "queue": "emails",
                "priority": 7,
                "group": "g",
            }
        },
    )
    scheduler = Scheduler(["default", "emails"])
    scheduler.run_once()
    emails = QueueKeys.of("rqueue", "emails")
    tick = (_now_ms(rqueue_redis) // 60_000) * 60_000
    assert rqueue_redis.zscore(emails.schedule, "e") is not None
    assert rqueue_redis.zscore(KEYS.schedule, "e") is None
    rqueue_redis.zadd(emails.schedule, {"e": tick})
    scheduler.run_once()
    enqueued = [kw["job"] for name, _sender, kw in events if name == "job_enqueued"]
    assert len(enqueued) == 1
    job = get_job(enqueued[0].id)
    assert job is not None
    assert (job.queue, job.priority, job.group, job.kwargs) == ("emails", 7, "g", {"tag": "k"})
    assert enqueued[0].run_at == job.run_at
    assert job.run_at is not None
    assert int(job.run_at.timestamp() * 1000) == tick


def test_a_poller_only_schedules_the_entries_of_its_queues(
    settings: SettingsFixture, rqueue_redis: redis.Redis, ledger: str
):
    _schedule(settings, {"e": {"job": RECORD, "every": 60, "args": [ledger, "e"], "queue": "low"}})
    assert Scheduler(["default", "emails"]).run_once() is None
    assert rqueue_redis.zcard(QueueKeys.of("rqueue", "low").schedule) == 0


def test_an_entry_whose_job_is_unknown_is_logged_and_not_run(
    settings: SettingsFixture, rqueue_redis: redis.Redis, caplog: pytest.LogCaptureFixture
):
    _schedule(settings, {"ghost": {"job": "no.such.job", "every": 1}})
    with caplog.at_level(logging.ERROR, logger="django_rqueue.scheduler"):
        assert Scheduler(["default"]).run_once() is None
    assert "schedule entry 'ghost' is not run" in caplog.text
    assert rqueue_redis.zcard(KEYS.schedule) == 0


def test_a_paused_entry_passes_its_ticks_and_runs_again_once_resumed(
    settings: SettingsFixture, rqueue_redis: redis.Redis, ledger: str
):
    _schedule(settings, {"e": {"job": RECORD, "every": 60, "args": [ledger, "e"]}})
    scheduler = Scheduler(["default"])
    scheduler.run_once()
    runtime.pause("e")
    tick = (_now_ms(rqueue_redis) // 60_000) * 60_000
    rqueue_redis.zadd(KEYS.schedule, {"e": tick})
    scheduler.run_once()
    assert _entry_jobs(rqueue_redis) == []
    assert _next_tick(rqueue_redis, "e") > tick  # the tick was passed over, not kept
    runtime.resume("e")
    rqueue_redis.zadd(KEYS.schedule, {"e": tick})
    scheduler.run_once()
    assert [run_at for run_at, _ in _entry_jobs(rqueue_redis)] == [tick]


def test_a_poll_costs_the_due_entries_not_all_entries(
    settings: SettingsFixture, rqueue_redis: redis.Redis, ledger: str
):
    schedule = {
        f"e{i}": {"job": RECORD, "every": 3600, "args": [ledger, "e"]} for i in range(10_000)
    }
    schedule["due"] = {"job": RECORD, "every": 60, "args": [ledger, "due"]}
    _schedule(settings, schedule)
    scheduler = Scheduler(["default"])
    scheduler.run_once()  # stores the 10 001 entries: O(entries), once
    assert rqueue_redis.zcard(KEYS.schedule) == 10_001
    tick = (_now_ms(rqueue_redis) // 60_000) * 60_000
    rqueue_redis.zadd(KEYS.schedule, {"due": tick})
    # A first run_once that crossed a minute ran "due" already: only what the next one makes.
    earlier = set(_entry_jobs(rqueue_redis))

    def calls() -> int:
        stats: dict[str, Any] = rqueue_redis.info("commandstats")
        return sum(v["calls"] for k, v in stats.items() if k != "cmdstat_info")

    before = calls()
    scheduler.run_once()  # one due entry among 10 001
    cost = calls() - before
    made = [
        run_at for run_at, job_id in _entry_jobs(rqueue_redis) if (run_at, job_id) not in earlier
    ]
    assert made == [tick]
    before = calls()
    scheduler.run_once()  # none due
    idle_cost = calls() - before
    print(f"commands per poll: {cost} with one due entry, {idle_cost} with none")
    assert cost < 40  # Redis commands, scripts' own included; 10 000 would be O(entries)
    assert idle_cost < 10


@pytest.mark.usefixtures("worker_may_close_db_connections")
def test_the_pollers_run_the_schedule_and_a_worker_runs_the_jobs(
    settings: SettingsFixture, rqueue_redis: redis.Redis, ledger: str
):
    _schedule(settings, {"e": {"job": RECORD, "every": 1, "args": [ledger, "e"]}})
    with poller_thread():
        run_worker(max_jobs=2)
    jobs = _entry_jobs(rqueue_redis)
    assert len(jobs) >= 2
    run_ats = [run_at for run_at, _ in jobs]
    assert all(t % 1000 == 0 for t in run_ats)
    assert len(set(run_ats)) == len(run_ats)


def test_a_poller_with_no_schedule_sends_no_schedule_command(rqueue_redis: redis.Redis):
    poller = Poller(["default"])
    poller.run_once()
    rqueue_redis.config_resetstat()
    assert poller.scheduler.run_once() is None
    stats: dict[str, Any] = rqueue_redis.info("commandstats")
    assert set(stats) == {"cmdstat_config|resetstat"}, stats
    assert not rqueue_redis.exists(KEYS.schedule)


def test_after_a_redis_outage_the_entries_are_stored_again(
    settings: SettingsFixture, rqueue_redis: redis.Redis, ledger: str
):
    _schedule(settings, {"e": {"job": RECORD, "every": 60, "args": [ledger, "e"]}})
    scheduler = Scheduler(["default"])
    scheduler.run_once()
    rqueue_redis.flushall()  # a Redis that restarted empty
    scheduler.resync()
    scheduler.run_once()
    wait_until(lambda: rqueue_redis.zscore(KEYS.schedule, "e") is not None, timeout=1)


def test_entries_removed_or_moved_in_the_settings_are_removed_when_a_poller_starts(
    settings: SettingsFixture, rqueue_redis: redis.Redis, ledger: str
):
    entry = {"job": RECORD, "every": 60, "args": [ledger, "e"]}
    _schedule(settings, {"a": entry, "b": entry})
    Scheduler(["default", "emails"]).run_once()
    runtime.pause("b")
    assert set(rqueue_redis.zrange(KEYS.schedule, 0, -1)) == {b"a", b"b"}

    _schedule(settings, {"a": {**entry, "queue": "emails"}, "c": entry})
    Scheduler(["default", "emails"]).run_once()
    assert rqueue_redis.zrange(KEYS.schedule, 0, -1) == [b"c"]
    assert not rqueue_redis.exists(KEYS.schedule_entry("b"))  # its pause went with it
    emails = QueueKeys.of("rqueue", "emails")
    assert rqueue_redis.zrange(emails.schedule, 0, -1) == [b"a"]


def test_a_queue_whose_redis_is_down_does_not_stop_the_others_entries(
    settings: SettingsFixture, rqueue_redis: redis.Redis, ledger: str, other_redis_server: Any
):
    entry = {"job": RECORD, "every": 60, "args": [ledger, "e"]}
    _schedule(settings, {"here": entry, "there": {**entry, "queue": "emails"}})
    scheduler = Scheduler(["default", "emails"])
    scheduler.run_once()
    other_redis_server.stop()  # the Redis of "emails"
    try:
        tick = (_now_ms(rqueue_redis) // 60_000) * 60_000
        rqueue_redis.zadd(KEYS.schedule, {"here": tick})
        scheduler.run_once()  # no RedisUnavailable: "default" is served
        assert [run_at for run_at, _ in _entry_jobs(rqueue_redis)] == [tick]
        with pytest.raises(RedisUnavailable):  # a scheduler with only that Redis says so
            Scheduler(["emails"]).run_once()
    finally:
        other_redis_server.restart()
    scheduler.run_once()  # both back: the entries of "emails" are stored again
    with other_redis_server.client() as there:
        wait_until(
            lambda: there.zscore(QueueKeys.of("rqueue", "emails").schedule, "there") is not None,
            timeout=5,
        )
