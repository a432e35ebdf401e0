"""Periodic jobs across real processes: every tick enqueued exactly once, kill -9 included.

The pollers (``rqueue_poller``, and each ``rqueue_work``'s poller child) run
the schedule of ``RQUEUE_TEST_SCHEDULE`` (read by tests/settings.py): one
``every: 1`` entry whose job is ``fault_noop``. What counts is what Redis
holds afterwards: the run-at of every job the entry enqueued, one per tick
(multiples of 1000 ms, none twice, none missing between the first and the
last), and every such job run to success by the workers.
"""

from __future__ import annotations

import json
import signal

import redis

from django_rqueue.engine.keys import QueueKeys

from .harness import Faults, WorkerProcess, wait_until

KEYS = QueueKeys.of("rqueue", "default")
JOB = "tests.jobs_app.jobs.fault_noop"


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _schedule_env(faults: Faults) -> dict[str, str]:
    entry = {"job": JOB, "every": 1, "args": [faults.ledger, "tick"]}
    return {"RQUEUE_TEST_SCHEDULE": json.dumps({"tick": entry})}


def _ticks(client: redis.Redis) -> dict[int, list[str]]:
    """Run-at (ms) -> ids of the entry's jobs in Redis."""
    found: dict[int, list[str]] = {}
    for key in client.scan_iter(match=f"{KEYS.base}job:*", count=1000):
        due, at, name = client.hmget(key, ["due", "at", "n"])
        if name is not None and _text(name) == JOB:
            # 'due' is left out of the hash when it equals 'at' (claimed in the tick's ms).
            run_at = int(due or at or 0)
            found.setdefault(run_at, []).append(_text(key).removeprefix(f"{KEYS.base}job:"))
    return found


def _wait_for_ticks(client: redis.Redis, count: int, timeout: float = 60.0) -> None:
    wait_until(
        lambda: len(_ticks(client)) >= count,
        timeout=timeout,
        interval=0.1,
        message=f"fewer than {count} ticks enqueued",
    )


def _assert_one_job_per_tick(faults: Faults, minimum: int) -> list[int]:
    ticks = _ticks(faults.client)
    run_ats = sorted(ticks)
    assert len(run_ats) >= minimum, run_ats
    doubled = {t: ids for t, ids in ticks.items() if len(ids) > 1}
    assert doubled == {}, f"ticks enqueued twice: {doubled}"
    assert all(t % 1000 == 0 for t in run_ats), run_ats
    missing = sorted(set(range(run_ats[0], run_ats[-1] + 1, 1000)) - set(run_ats))
    assert missing == [], f"ticks lost: {missing}"
    ids = [job_id for ids in ticks.values() for job_id in ids]
    faults.wait_final(ids, timeout=30)
    report = faults.check(ids)
    assert report.duplicates == {}
    assert set(report.states.values()) == {"succeeded"}, report.states
    return run_ats


def test_two_workers_and_two_pollers_enqueue_each_tick_once(faults: Faults):
    env = _schedule_env(faults)
    workers = [faults.worker("--concurrency", "1", env=env) for _ in range(2)]
    pollers = [faults.command("rqueue_poller", env=env) for _ in range(2)]
    for worker in workers:
        faults.wait_ready(worker, children=1)

    # About 10 s of ticks, all four schedulers running for most of them.
    first = len(_ticks(faults.client))
    _wait_for_ticks(faults.client, first + 10)
    for process in [*workers, *pollers]:
        assert process.alive(), process.report()

    faults.stop_all()
    _assert_one_job_per_tick(faults, minimum=10)


def _die_after_claim(faults: Faults, env: dict[str, str]) -> WorkerProcess:
    """A poller that SIGKILLs itself right after the first tick it claims."""
    return faults.command("rqueue_poller", env={**env, "RQUEUE_TEST_DIE_AFTER_CLAIM": "1"})


def test_a_poller_killed_mid_tick_loses_no_tick_and_doubles_none(faults: Faults):
    env = _schedule_env(faults)
    steady = faults.worker("--concurrency", "1", env=env)
    faults.wait_ready(steady, children=1)
    _wait_for_ticks(faults.client, 1)

    # Three times: a poller claims a tick (claim and enqueue are one script) and is
    # SIGKILLed before it does anything else; the steady worker's poller goes on.
    for _ in range(3):
        victim = _die_after_claim(faults, env)
        victim.wait(timeout=60)
        assert victim.proc.returncode == -signal.SIGKILL, victim.report()

    # And one killed from outside at an arbitrary moment of its rounds.
    outside = faults.command("rqueue_poller", env=env)
    seen = len(_ticks(faults.client))
    _wait_for_ticks(faults.client, seen + 2)
    outside.signal(signal.SIGKILL)
    outside.wait(timeout=10)

    seen = len(_ticks(faults.client))
    _wait_for_ticks(faults.client, seen + 2)
    assert steady.alive(), steady.report()
    faults.stop_all()
    _assert_one_job_per_tick(faults, minimum=6)


def test_ticks_missed_while_no_poller_ran_give_one_catch_up_run(faults: Faults):
    env = _schedule_env(faults)
    poller = faults.command("rqueue_poller", env=env)
    _wait_for_ticks(faults.client, 2)
    poller.kill()
    last = max(_ticks(faults.client))

    def now_ms() -> int:
        seconds, micros = faults.client.time()
        return int(seconds) * 1000 + int(micros) // 1000

    # Let at least three ticks pass with no poller at all.
    wait_until(lambda: now_ms() >= last + 4_000, timeout=10, interval=0.1)
    restarted = faults.command("rqueue_poller", env=env)
    wait_until(lambda: max(_ticks(faults.client)) > last, timeout=30, interval=0.1)
    catch_up = min(t for t in _ticks(faults.client) if t > last)
    _wait_for_ticks(faults.client, len(_ticks(faults.client)) + 2)
    restarted.kill()

    after = sorted(t for t in _ticks(faults.client) if t > last)
    # The first missed tick ran once; the ones after it, missed too, did not run;
    # then one per tick again.
    assert after[0] == catch_up == last + 1000
    assert after[1] - after[0] >= 3000, after
    assert all(b - a == 1000 for a, b in zip(after[1:], after[2:], strict=False)), after
    assert all(len(ids) == 1 for ids in _ticks(faults.client).values())


def test_a_worker_without_poller_runs_no_schedule(faults: Faults):
    env = _schedule_env(faults)
    worker = faults.worker("--concurrency", "1", "--without-poller", env=env)
    faults.wait_ready(worker, children=1)

    def redis_ms() -> int:
        seconds, micros = faults.client.time()
        return int(seconds) * 1000 + int(micros) // 1000

    # Two ticks of the `every: 1` entry pass with the worker serving its queue.
    start_ms = redis_ms()
    wait_until(lambda: redis_ms() >= start_ms + 2_500, timeout=10, interval=0.1)
    assert worker.alive(), worker.report()
    assert not faults.client.exists(KEYS.schedule)  # no poller ever stored the entry
    assert _ticks(faults.client) == {}
