"""The master's lease renewals (:mod:`django_rqueue.master.renewals`), in-process, against the
real test redis-server, with a stand-in child (:mod:`tests.master.support`)."""

from __future__ import annotations

import redis

from django_rqueue.master.children import Child, KillReason
from django_rqueue.master.supervisor import Supervisor
from django_rqueue.worker.hooks import AttemptOutcome
from tests.jobs_app.jobs import record
from tests.master.support import FakeChild, reserve
from tests.support import transitions
from tests.support.inprocess import keys
from tests.support.processes import alive


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
