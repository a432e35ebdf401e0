"""The prefork master's lease renewals and passes, in-process, against the real test redis-server.

The master's record of a child (:class:`~django_rqueue.worker.children.Child`)
is fed through a real pipe by the child's side of the protocol
(:class:`~django_rqueue.worker.children.PipeHooks`); the "child" is a plain
``sleep`` process in its own process group, so that whether the master
SIGKILLs it can be observed without forking a worker.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis

from django_rqueue.job import Job
from django_rqueue.worker.children import Child, ChildKind, KillReason, PipeHooks
from django_rqueue.worker.hooks import AttemptOutcome
from django_rqueue.worker.supervisor import PASS_GAP, Supervisor
from tests.jobs_app.jobs import record
from tests.support import transitions
from tests.support.inprocess import keys
from tests.support.processes import alive


@dataclass
class FakeChild:
    """A master with one child record, the child's end of its pipe, and a stand-in process."""

    master: Supervisor
    child: Child
    hooks: PipeHooks
    process: subprocess.Popen[bytes]


@pytest.fixture
def supervised() -> Iterator[FakeChild]:
    process = subprocess.Popen(["sleep", "60"], start_new_session=True)  # its own group
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    master = Supervisor(["default"], concurrency=1, with_poller=False, worker_id="w-master")
    child = Child(pid=process.pid, fd=read_fd, kind=ChildKind.WORKER)
    master.children[process.pid] = child
    try:
        yield FakeChild(master, child, PipeHooks(write_fd), process)
    finally:
        process.kill()
        process.wait(timeout=10)
        master.selector.close()
        os.close(read_fd)
        os.close(write_fd)


def reserve(client: redis.Redis) -> Job[Any]:
    """Reserve the next job of ``default`` as worker ``w-master`` (60 s lease)."""
    got = transitions.reserve(client, keys(), lease_ms=60_000, worker_id="w-master")
    assert got is not None
    return Job.from_fields(*got)


def renew_now(master: Supervisor, child: Child) -> None:
    """Make the running jobs' renewals due, then let the master renew the leases that are due."""
    for running in child.running.values():
        running.renew_at = 0.0
    master._renew_leases(1.0)


def test_a_renewal_refused_for_a_job_whose_end_is_still_in_the_pipe_kills_no_one(
    supervised: FakeChild, ledger: str, rqueue_redis: redis.Redis
) -> None:
    """The child ran ``lost`` past its lease (a reclaim moved the token on), reported its
    discarded end and started ``next``; the master had not read that yet when its
    renewal of ``lost`` was refused. It must read the pipe and leave the child alone:
    killing it would fail ``next``'s attempt with "worker process died"."""
    master, child, hooks = supervised.master, supervised.child, supervised.hooks
    lost_id, next_id = record.delay(ledger, "lost").id, record.delay(ledger, "next").id
    lost = reserve(rqueue_redis)
    hooks.started("default", lost)
    master._read(child)
    assert list(child.running) == [lost_id]
    rqueue_redis.hset(keys().job(lost_id), "token", lost.token + 1)  # as a reclaim does
    following = reserve(rqueue_redis)
    assert following.id == next_id
    hooks.finished(lost, AttemptOutcome.DISCARDED)
    hooks.started("default", following)  # written now; the master has not read it

    renew_now(master, child)

    assert child.killed_for is None  # not killed
    assert alive(supervised.process.pid), "the master killed a child that runs another job"
    assert [(r.job_id, r.token) for r in child.running.values()] == [(next_id, following.token)]
    assert master.processed == 1  # the discarded end was read
    fields = transitions.read_job(rqueue_redis, keys(), next_id)
    assert fields[b"s"] == b"running" and b"nerr" not in fields  # no attempt failed


def test_a_renewal_refused_for_the_job_the_child_still_runs_kills_the_child(
    supervised: FakeChild, ledger: str, rqueue_redis: redis.Redis
) -> None:
    master, child, hooks = supervised.master, supervised.child, supervised.hooks
    lost_id = record.delay(ledger, "lost").id
    lost = reserve(rqueue_redis)
    hooks.started("default", lost)
    master._read(child)
    rqueue_redis.hset(keys().job(lost_id), "token", lost.token + 1)  # as a reclaim does

    renew_now(master, child)

    assert child.killed_for is KillReason.LEASE
    assert supervised.process.wait(timeout=10) == -9  # SIGKILLed


def test_a_renewal_refused_for_a_job_that_finished_under_our_token_kills_no_one(
    supervised: FakeChild, ledger: str, rqueue_redis: redis.Redis
) -> None:
    master, child, hooks = supervised.master, supervised.child, supervised.hooks
    done_id = record.delay(ledger, "done").id
    done = reserve(rqueue_redis)
    hooks.started("default", done)
    master._read(child)
    transitions.ack(rqueue_redis, keys(), done_id, done.token, '"done"', 600)

    renew_now(master, child)  # its "end" has not even been sent yet

    assert child.killed_for is None  # not killed
    assert alive(supervised.process.pid)


def test_busy_children_wake_the_master_at_most_once_per_pass_gap(
    supervised: FakeChild, ledger: str, rqueue_redis: redis.Redis
) -> None:
    """A child that runs job after job writes to its pipe all the time: the master reads
    it, then lets the next messages gather for PASS_GAP instead of waking for each job."""
    master, child, hooks = supervised.master, supervised.child, supervised.hooks
    master.selector.register(child.fd, selectors.EVENT_READ, child.pid)
    first_id, second_id = record.delay(ledger, "1").id, record.delay(ledger, "2").id
    first = reserve(rqueue_redis)
    hooks.started("default", first)
    began = time.monotonic()
    master._tick()
    assert list(child.running) == [first_id]
    hooks.finished(first, AttemptOutcome.SUCCEEDED)
    hooks.started("default", reserve(rqueue_redis))  # waiting in the pipe at once

    master._tick()

    assert time.monotonic() - began >= PASS_GAP
    assert list(child.running) == [second_id] and master.processed == 1
