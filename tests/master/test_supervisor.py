"""The prefork master's passes, in-process, against the real test redis-server, with a
stand-in child (:mod:`tests.master.support`)."""

from __future__ import annotations

import os
import selectors
import signal
import time

import redis

from django_rqueue.master.children import ChildKind
from django_rqueue.master.supervisor import PASS_GAP
from django_rqueue.worker.hooks import AttemptOutcome
from tests.jobs_app.jobs import record
from tests.master.support import FakeChild, reserve
from tests.support.waiting import wait_until


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


def test_a_child_forked_as_a_stop_begins_is_told_to_stop_too(supervised: FakeChild) -> None:
    """A stop's signal may run its handler between the decision to fork a child and the
    child's record (recycling as SIGTERM comes): that child must be stopped as well, not
    left serving until the shutdown timeout kills it."""
    master = supervised.master
    master.stop_deadline = time.monotonic() + 30  # the handler ran: a stop began
    master._spawn(ChildKind.WORKER)  # a real worker child, forked after it
    [pid] = [p for p in master.children if p != supervised.child.pid]

    reaped: list[int] = []

    def gone() -> bool:
        if os.waitpid(pid, os.WNOHANG) != (0, 0):
            reaped.append(pid)
        return bool(reaped)

    try:
        wait_until(gone, timeout=30, message="the child forked during the stop kept serving")
    finally:
        if not reaped:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
