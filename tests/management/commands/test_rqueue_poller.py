"""``manage.py rqueue_poller`` as real subprocesses: on-time promotion, and racing pollers."""

from __future__ import annotations

import datetime
import re
import signal
from collections import Counter

import redis

from django_rqueue import JobStatus, get_job
from tests.jobs_app.jobs import read_ledger, record
from tests.support.inprocess import keys, queued_ids, stats
from tests.support.processes import STARTUP, CommandProcess, children_of
from tests.support.waiting import wait_until

from .conftest import Manage


def blocked(client: redis.Redis) -> int:
    return sum(1 for c in client.client_list() if c.get("cmd") == "blpop")


def stop(*commands: CommandProcess, nudge: redis.Redis | None = None) -> None:
    """SIGTERM ``commands`` and check they exit 0.

    A poller notices the signal when its blocking wait ends (at most
    ``MAX_SLEEP`` s); with ``nudge`` the test pushes wake-up tokens meanwhile so
    that it does not have to sit out that wait.
    """
    for command in commands:
        command.signal(signal.SIGTERM)

    def exited() -> bool:
        if nudge is not None:
            for queue in ("default", "emails", "low"):
                nudge.rpush(keys(queue).wake, "1")
        return not any(command.alive() for command in commands)

    wait_until(exited, timeout=10, interval=0.05, message="not stopped by SIGTERM")
    for command in commands:
        assert command.wait(1) == 0, command.report()


def test_poller_and_worker_without_poller_run_delayed_jobs_on_time_in_due_order(
    manage: Manage, ledger: str, rqueue_redis: redis.Redis
) -> None:
    poller = manage("rqueue_poller")
    worker = manage("rqueue_work", "--without-poller")
    wait_until(lambda: blocked(rqueue_redis) >= 2, timeout=STARTUP, message="not started")

    delays = {"c": 1.2, "a": 0.4, "b": 0.8}
    jobs = {tag: record.using(delay=d).delay(ledger, tag) for tag, d in delays.items()}
    wait_until(lambda: len(read_ledger(ledger)) == 3, timeout=10, message="jobs did not run")

    runs = read_ledger(ledger)
    assert [e["tag"] for e in runs] == ["a", "b", "c"]

    # A ledger line is written inside the job; its ack follows a moment later.
    def all_acked() -> bool:
        found = [get_job(j.id) for j in jobs.values()]
        return all(j is not None and j.status is JobStatus.SUCCEEDED for j in found)

    wait_until(all_acked, timeout=5, message="jobs not acked")
    for entry in runs:
        job = get_job(jobs[entry["tag"]].id)
        assert job is not None
        assert job.run_at is not None
        lateness = entry["t"] - job.run_at.timestamp()
        print(f"{entry['tag']}: started {lateness * 1000:.1f} ms after run_at")
        assert lateness >= 0, f"{entry['tag']} started {-lateness:.3f} s before run_at"
        assert entry["pid"] in children_of(worker.pid)  # a child of the worker command
    stop(poller, worker)


def test_worker_without_poller_leaves_due_jobs_to_a_poller(
    manage: Manage, ledger: str, rqueue_redis: redis.Redis
) -> None:
    due = record.using(delay=0.05).delay(ledger, "due")
    worker = manage("rqueue_work", "--without-poller")
    wait_until(lambda: "serving" in worker.stderr(), timeout=STARTUP, message="not started")
    wait_until(lambda: blocked(rqueue_redis) >= 1, timeout=5, message="worker not idle")

    # Due for a while, and the worker is idle: only a poller would move it.
    assert get_job(due.id).status is JobStatus.SCHEDULED  # type: ignore[union-attr]
    assert read_ledger(ledger) == []

    poller = manage("rqueue_poller", "--queues", "default")
    wait_until(lambda: read_ledger(ledger), timeout=STARTUP, message="job did not run")
    assert read_ledger(ledger)[0]["pid"] in children_of(worker.pid)
    stop(poller, worker, nudge=rqueue_redis)


def test_two_poller_commands_racing_promote_5000_due_jobs_exactly_once(
    manage: Manage, ledger: str, rqueue_redis: redis.Redis
) -> None:
    total = 5000
    pollers = [manage("rqueue_poller", "--verbosity", "2") for _ in range(2)]
    wait_until(lambda: blocked(rqueue_redis) >= 2, timeout=STARTUP, message="not started")

    # Run-at times fall from start + 0.5 s to start, 0.1 ms apart: every job is
    # the new earliest one, so the sleeping pollers are woken again and again,
    # and both end up promoting the same 0.5 s stretch of due jobs.
    start = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=2.5)
    jobs = [
        record.using(run_at=start + datetime.timedelta(milliseconds=(total - n) / 10)).delay(
            ledger, str(n)
        )
        for n in range(total)
    ]
    ids = [job.id for job in jobs]
    # On a loaded machine the last jobs may be enqueued after their run_at:
    # those go straight to the queue, and no poller promotes them.
    scheduled = sum(1 for job in jobs if job.status is JobStatus.SCHEDULED)
    assert scheduled > total // 2, f"only {scheduled} jobs were scheduled: machine too slow"
    k = keys()
    wait_until(lambda: rqueue_redis.zcard(k.delayed) == 0, timeout=30, message="not promoted")
    stop(*pollers, nudge=rqueue_redis)

    queued = queued_ids(rqueue_redis)
    assert len(queued) == total
    assert Counter(queued) == Counter(ids)  # every id exactly once
    assert stats(rqueue_redis)["queued"] == total
    assert rqueue_redis.zcard(k.delayed) == 0
    # Each poller logs what it promoted; together exactly the scheduled ones.
    counts = [
        sum(int(n) for n in re.findall(r"promoted (\d+) due job", p.stderr())) for p in pollers
    ]
    print(f"promoted per poller: {counts} ({scheduled} of {total} were scheduled)")
    assert sum(counts) == scheduled
    assert min(counts) > 0, "the pollers did not race"
