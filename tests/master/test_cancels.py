"""The master's cancel watch (:mod:`django_rqueue.master.cancels`), in-process, against the real
test redis-server, with a stand-in child (:mod:`tests.master.support`)."""

from __future__ import annotations

import os

import redis

from django_rqueue.engine.fields import JobFields
from django_rqueue.worker.cancelling import read_requests
from tests.jobs_app.jobs import record
from tests.master.support import FakeChild, reserve
from tests.support.inprocess import keys


def test_a_corrupt_record_among_the_running_jobs_is_passed_over_and_the_others_are_seen(
    supervised: FakeChild, ledger: str, rqueue_redis: redis.Redis
) -> None:
    """One running job's record became a string (WRONGTYPE to its HGET): the look must not
    raise, and a cancel asked for another running job is still carried out."""
    master, child, hooks = supervised.master, supervised.child, supervised.hooks
    spoiled_id, asked_id = record.delay(ledger, "spoiled").id, record.delay(ledger, "asked").id
    spoiled, asked = reserve(rqueue_redis), reserve(rqueue_redis)
    hooks.started("default", spoiled)
    hooks.started("default", asked)
    master._read(child)
    assert sorted(child.running) == sorted([spoiled_id, asked_id])
    rqueue_redis.delete(keys().job(spoiled_id))
    rqueue_redis.set(keys().job(spoiled_id), "garbage")
    rqueue_redis.hset(keys().job(asked_id), JobFields.CANCEL_REQUESTED, "1")
    read_fd, child.cancel_fd = os.pipe()
    os.set_blocking(read_fd, False)
    try:
        master.cancels.look(master.children.values(), now=100.0)
        sent = read_requests(read_fd)
    finally:
        os.close(read_fd)
        os.close(child.cancel_fd)

    assert sent == {asked.id}  # the soft stop went to the child for that job only
    assert list(child.cancelling) == [asked.id]
