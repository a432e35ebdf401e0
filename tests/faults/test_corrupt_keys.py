"""Corrupt keys in Redis never stall a queue or kill a process (issue 23, item 1).

Each test plants what a foreign write leaves behind (a job record replaced by a
string, list or set, a record without its state, garbage ids in ``delayed`` and in
the lease set, a ring member whose group list is a string, a ``delayed`` key that
is not a zset) into the real Redis, runs real worker and poller processes, and checks
that the job concerned ends in the failed store with an error saying what is wrong,
that the healthy jobs of the same group and queue finish, and that no process died.
"""

from __future__ import annotations

import json

import pytest
import redis

from django_rqueue.engine.keys import QueueKeys
from tests.jobs_app.jobs import fault_noop, fault_sleep

from .harness import Faults, WorkerProcess, job_hash, wait_until

KEYS = QueueKeys.of("rqueue", "default")  # tests/settings.py leaves KEY_PREFIX at its default
#: How a record is spoiled -> what the failed store says about it.
PROBLEMS = {
    "string": "job record is corrupt: it is a string, not a hash",
    "list": "job record is corrupt: it is a list, not a hash",
    "set": "job record is corrupt: it is a set, not a hash",
    "stateless": 'job record is corrupt: it has no state (field "s")',
}


def spoil(client: redis.Redis, job_id: str, kind: str) -> None:
    """Replace the record of ``job_id`` as a foreign write would."""
    key = KEYS.job(job_id)
    if kind == "stateless":
        client.hdel(key, "s")
        return
    client.delete(key)
    if kind == "string":
        client.set(key, "not a job")
    elif kind == "list":
        client.rpush(key, "a", "b")
    else:
        client.sadd(key, "a")


def wait_mended(faults: Faults, ids: list[str], timeout: float = 20) -> None:
    """Until the records of ``ids`` are hashes again (the harness reads them as hashes)."""
    wait_until(
        lambda: all(faults.client.type(KEYS.job(i)) in (b"hash", "hash") for i in ids),
        timeout=timeout,
        interval=0.1,
        message="corrupt records were not moved to the failed store",
    )


def assert_failed_as_corrupt(faults: Faults, job_id: str, kind: str) -> None:
    job = job_hash(faults.client, job_id)
    assert job["s"] == "failed", job
    assert json.loads(job["error"])["message"] == PROBLEMS[kind]
    assert faults.client.zscore(KEYS.failed, job_id) is not None


def assert_nothing_died(process: WorkerProcess, children: list[int]) -> None:
    assert process.alive(), process.report()
    assert sorted(process.children()) == sorted(children), process.report()
    assert "Traceback" not in process.stderr(), process.report()


def test_corrupt_jobs_in_a_group_are_failed_and_the_group_keeps_being_served(
    faults: Faults,
) -> None:
    # Group "g": a corrupt job at its head, then healthy and corrupt ones in turn.
    kinds = list(PROBLEMS)
    victims: dict[str, str] = {}
    healthy: list[str] = []
    for n, kind in enumerate(kinds):
        victims[kind] = fault_noop.using(group="g").delay(faults.ledger, f"v-{kind}").id
        healthy.append(fault_noop.using(group="g").delay(faults.ledger, f"h{n}").id)
    other = fault_noop.using(group="other").delay(faults.ledger, "other").id
    for kind, job_id in victims.items():
        spoil(faults.client, job_id, kind)
    # A ring member whose group list is a string.
    faults.client.rpush(KEYS.ring(0), "bad")
    faults.client.set(KEYS.group(0, "bad"), "garbage")

    worker = faults.worker("--queues", "default", "--concurrency", "1", lease=1, grace=1)
    children = faults.wait_ready(worker)
    wait_mended(faults, list(victims.values()))
    report = faults.wait_and_check([*victims.values(), *healthy, other], timeout=30)

    assert all(report.states[job_id] == "succeeded" for job_id in [*healthy, other])
    for kind, job_id in victims.items():
        assert_failed_as_corrupt(faults, job_id, kind)
        assert report.starts[job_id] == 0
    assert not faults.client.exists(KEYS.group(0, "bad"))
    # The group is still in its ring: a new job of it runs.
    late = fault_noop.using(group="g").delay(faults.ledger, "late").id
    assert faults.wait_and_check([late], timeout=10).states[late] == "succeeded"
    assert_nothing_died(worker, children)


@pytest.mark.parametrize("poller", ["rqueue_poller", "worker's poller"])
def test_corrupt_delayed_jobs_are_failed_and_the_poller_goes_on(
    faults: Faults, poller: str
) -> None:
    victims = {
        kind: fault_noop.using(delay=1).delay(faults.ledger, f"v-{kind}").id
        for kind in ("string", "list")
    }
    healthy = [fault_noop.using(delay=1).delay(faults.ledger, f"h{n}").id for n in range(3)]
    for kind, job_id in victims.items():
        spoil(faults.client, job_id, kind)
    faults.client.zadd(KEYS.delayed, {"default:not-a-job": 0, "garbage": 0})

    if poller == "rqueue_poller":
        worker = faults.worker(
            "--queues", "default", "--concurrency", "1", "--without-poller", lease=1, grace=1
        )
        standalone = faults.command("rqueue_poller", "--queues", "default", lease=1)
    else:
        worker = faults.worker("--queues", "default", "--concurrency", "1", lease=1, grace=1)
    children = faults.wait_ready(worker)
    wait_mended(faults, list(victims.values()))
    report = faults.wait_and_check([*victims.values(), *healthy], timeout=30)

    assert all(report.states[job_id] == "succeeded" for job_id in healthy)
    for kind, job_id in victims.items():
        assert_failed_as_corrupt(faults, job_id, kind)
    assert faults.client.zrange(KEYS.delayed, 0, -1) == []
    # A job scheduled afterwards is still promoted: the poller is alive.
    late = fault_noop.using(delay=0.5).delay(faults.ledger, "late").id
    assert faults.wait_and_check([late], timeout=10).states[late] == "succeeded"
    assert_nothing_died(worker, children)
    if poller == "rqueue_poller":
        assert standalone.alive(), standalone.report()
        assert "Traceback" not in standalone.stderr(), standalone.report()


def test_a_corrupt_record_in_the_lease_set_is_failed_by_the_reclaim(faults: Faults) -> None:
    victim = fault_noop.delay(faults.ledger, "victim").id
    healthy = fault_noop.delay(faults.ledger, "healthy").id
    # As if a worker that reserved it died, and then its record was overwritten.
    faults.client.lrem(KEYS.group(0, ""), 1, victim)
    faults.client.hincrby(KEYS.stats, "queued", -1)
    spoil(faults.client, victim, "list")
    faults.client.zadd(KEYS.reserved, {victim: 1, "default:not-a-job": 1})

    worker = faults.worker("--queues", "default", "--concurrency", "1", lease=1, grace=1)
    children = faults.wait_ready(worker)
    wait_mended(faults, [victim])
    report = faults.wait_and_check([victim, healthy], timeout=20)

    assert report.states[healthy] == "succeeded"
    assert_failed_as_corrupt(faults, victim, "list")
    assert faults.client.zrange(KEYS.reserved, 0, -1) == []
    assert_nothing_died(worker, children)


def test_a_record_spoiled_while_its_job_runs_ends_in_the_failed_store(faults: Faults) -> None:
    worker = faults.worker("--queues", "default", "--concurrency", "1", lease=1, grace=1)
    faults.wait_ready(worker)
    victim = fault_sleep.delay(faults.ledger, "victim", 3).id
    faults.wait_event("start", tag="victim")
    spoil(faults.client, victim, "string")
    # The lease renewal is refused: the master stops the job, its report is refused too,
    # and the reclaim of its lease fails it for good.
    after = [fault_noop.delay(faults.ledger, f"after{n}").id for n in range(3)]

    wait_mended(faults, [victim])
    report = faults.wait_and_check([victim, *after], timeout=20)

    assert all(report.states[job_id] == "succeeded" for job_id in after)
    assert_failed_as_corrupt(faults, victim, "string")
    assert worker.alive(), worker.report()
    assert "its record in Redis is corrupt (it is a string, not a hash)" in worker.stderr()
    assert "Traceback" not in worker.stderr(), worker.report()


def test_a_delayed_key_that_is_not_a_zset_is_logged_and_the_other_queues_go_on(
    faults: Faults,
) -> None:
    emails = QueueKeys.of("rqueue", "emails")
    faults.client.set(emails.delayed, "garbage")
    healthy = [fault_noop.using(delay=0.5).delay(faults.ledger, f"h{n}").id for n in range(3)]

    worker = faults.worker(
        "--queues", "default", "--concurrency", "1", "--without-poller", lease=1, grace=1
    )
    poller = faults.command("rqueue_poller", "--queues", "emails,default", lease=1)
    children = faults.wait_ready(worker)
    report = faults.wait_and_check(healthy, timeout=20)

    assert all(report.states[job_id] == "succeeded" for job_id in healthy)
    assert poller.alive(), poller.report()
    assert "queue emails: could not promote due jobs" in poller.stderr()
    assert "Traceback" not in poller.stderr(), poller.report()
    assert_nothing_died(worker, children)


def test_a_lease_set_that_is_not_a_zset_pauses_its_queue_and_kills_no_child(
    faults: Faults,
) -> None:
    emails = QueueKeys.of("rqueue", "emails")
    stuck = fault_noop.using(queue="emails").delay(faults.ledger, "stuck").id
    faults.client.set(emails.reserved, "garbage")
    healthy = [fault_noop.delay(faults.ledger, f"h{n}").id for n in range(3)]

    worker = faults.worker(
        "--queues", "emails,default", "--concurrency", "1", "--without-poller", lease=1, grace=1
    )
    children = faults.wait_ready(worker)
    report = faults.wait_and_check(healthy, timeout=20)

    assert all(report.states[job_id] == "succeeded" for job_id in healthy)
    assert "queue emails: Redis refused to hand out jobs" in worker.stderr()
    assert job_hash(faults.client, stuck, "emails")["s"] == "queued"  # put back, not stranded
    # Once the key is mended, the queue is served again.
    faults.client.delete(emails.reserved)
    assert faults.wait_and_check([stuck], timeout=20).states[stuck] == "succeeded"
    assert_nothing_died(worker, children)
