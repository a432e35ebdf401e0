"""``.delay_many()`` on a real redis-server: bulk enqueue (``transitions.enqueue_batch()``),
its batches inside a transaction, and the package's own record of the jobs that wait for the
commit."""

from __future__ import annotations

import datetime
from typing import Any, assert_type

import pytest
import redis
from django.db import transaction
from pytest_django.fixtures import Settings

from django_rqueue import Job, JobStatus, get_job
from django_rqueue.engine.calls import EnqueueShared
from django_rqueue.engine.keys import QueueKeys
from django_rqueue.engine.scripts import load
from django_rqueue.worker.loop import Worker
from tests.enqueue.jobs import add, calls, carry, digest, job_ids
from tests.support import transitions

KEYS = QueueKeys.of("rqueue", "default")

pytestmark = pytest.mark.usefixtures("worker_may_close_db_connections")


def test_delay_many_writes_every_call_in_order(redis_client: redis.Redis, enqueued: list[str]):
    jobs = add.delay_many([((i,), {"y": 10}) for i in range(1203)], batch_size=500)
    assert len(jobs) == 1203
    assert all(j.status is JobStatus.QUEUED for j in jobs)
    assert len({j.id for j in jobs}) == 1203
    assert job_ids(redis_client) == {j.id for j in jobs}
    assert enqueued == [j.id for j in jobs]  # one job_enqueued per created job
    assert redis_client.hget(KEYS.stats, "queued") == b"1203"
    got = get_job(jobs[7].id)
    assert got is not None
    assert (got.args, got.kwargs, got.name) == ([7], {"y": 10}, add.name)
    worker = Worker(["default"], with_poller=False)
    calls.clear()
    for _ in range(3):
        assert worker.work_once()
    assert calls == [(0, 10), (1, 10), (2, 10)]  # FIFO, as if delayed one by one


def test_delay_many_of_nothing_returns_an_empty_list(redis_client: redis.Redis):
    assert add.delay_many([]) == []
    assert add.delay_many(iter([])) == []
    assert redis_client.dbsize() == 0


def test_delay_many_accepts_a_generator_and_lists(redis_client: redis.Redis):
    jobs = add.delay_many(([i], {}) for i in range(3))
    assert [j.args for j in jobs] == [[0], [1], [2]]
    assert len(job_ids(redis_client)) == 3


def test_delay_many_honours_using_options(redis_client: redis.Redis):
    jobs = add.using(queue="emails", priority=5, group="g", delay=60, max_attempts=7).delay_many(
        [((1,), {}), ((2,), {})]
    )
    assert all(j.status is JobStatus.SCHEDULED and j.queue == "emails" for j in jobs)
    assert job_ids(redis_client, "emails") == {j.id for j in jobs}
    got = get_job(jobs[0].id)
    assert got is not None
    assert (got.status, got.priority, got.group, got.max_attempts) == (
        JobStatus.SCHEDULED,
        5,
        "g",
        7,
    )
    emails = QueueKeys.of("rqueue", "emails")
    assert redis_client.zcard(emails.delayed) == 2


def test_delay_many_with_run_at_schedules_every_job(redis_client: redis.Redis):
    when = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
    jobs = add.using(run_at=when).delay_many([((1,), {}), ((2,), {})])
    scores = {int(redis_client.zscore(KEYS.delayed, j.id) or 0) for j in jobs}
    assert scores == {int(when.timestamp() * 1000)}
    assert all(j.status is JobStatus.SCHEDULED for j in jobs)


def test_delay_many_gives_every_job_the_expiry_of_using(redis_client: redis.Redis):
    relative = add.using(expires=90).delay_many([((1,), {}), ((2,), {})])
    for sent in relative:
        got = get_job(sent.id)
        assert got is not None and got.enqueued_at is not None
        assert got.expires_at == got.enqueued_at + datetime.timedelta(seconds=90)
    when = datetime.datetime.now(datetime.UTC).replace(microsecond=0) + datetime.timedelta(days=1)
    absolute = add.using(expires=when).delay_many([((3,), {}), ((4,), {})])
    assert {getattr(get_job(j.id), "expires_at", None) for j in absolute} == {when}


@pytest.mark.parametrize(
    ("calls_", "message"),
    [
        ([((1,), {}), ((object(),), {})], r"call 1: job argument 'x' \(position 0\)"),
        ([((1,), {}), ((1,), {"y": {1, 2}})], r"call 1: job argument 'y'"),
        ([((1,), {}), (1, {})], r"call 1: expected an \(args, kwargs\) pair"),
        ([("ab", {})], r"call 0: expected an \(args, kwargs\) pair"),
        ([((1,),)], r"call 0: expected an \(args, kwargs\) pair"),
        ([((1,), {1: 2})], r"call 0: expected an \(args, kwargs\) pair"),
    ],
)
def test_a_bad_call_raises_type_error_naming_it_and_nothing_is_written(
    calls_: list[Any], message: str, redis_client: redis.Redis, enqueued: list[str]
):
    with pytest.raises(TypeError, match=message):
        add.delay_many(calls_)
    assert redis_client.dbsize() == 0
    assert enqueued == []


def test_a_bad_batch_size_is_refused(redis_client: redis.Redis):
    with pytest.raises(ValueError, match="batch_size"):
        add.delay_many([((1,), {})], batch_size=0)


def test_an_undeclared_queue_is_refused_before_writing(redis_client: redis.Redis):
    with pytest.raises(ValueError, match="not declared"):
        add.using(queue="nope").delay_many([((1,), {})])
    assert redis_client.dbsize() == 0


def test_unique_duplicates_resolve_to_the_holders_job(
    redis_client: redis.Redis, enqueued: list[str]
):
    holder = digest.delay(1)
    enqueued.clear()
    jobs = digest.delay_many([((1,), {}), ((2,), {}), ((2,), {}), ((3,), {})])
    assert jobs[0].id == holder.id
    assert jobs[1] is jobs[2]  # a duplicate inside the batch gets the first call's Job
    assert jobs[3].id not in (holder.id, jobs[1].id)
    assert job_ids(redis_client) == {holder.id, jobs[1].id, jobs[3].id}
    assert enqueued == [jobs[1].id, jobs[3].id]
    assert redis_client.hget(KEYS.stats, "queued") == b"3"
    assert redis_client.hget(KEYS.stats, "enqueued") == b"3"  # the duplicates created nothing


@pytest.mark.django_db(transaction=True)
def test_inside_atomic_the_batch_is_written_on_commit_by_one_callback(
    redis_client: redis.Redis, enqueued: list[str]
):
    with transaction.atomic():
        jobs = add.delay_many([((i,), {}) for i in range(5)])
        assert redis_client.dbsize() == 0
        assert len(transaction.get_connection().run_on_commit) == 1
        assert enqueued == []
    assert job_ids(redis_client) == {j.id for j in jobs}  # the returned ids are final
    assert len(enqueued) == 5


@pytest.mark.django_db(transaction=True)
def test_a_rollback_writes_none_of_the_batch(redis_client: redis.Redis):
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        add.delay_many([((i,), {}) for i in range(5)])
        raise ZeroDivisionError
    assert redis_client.dbsize() == 0


@pytest.mark.django_db(transaction=True)
def test_on_commit_false_writes_the_batch_at_once(redis_client: redis.Redis):
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        jobs = add.using(on_commit=False).delay_many([((1,), {}), ((2,), {})])
        assert job_ids(redis_client) == {j.id for j in jobs}
        raise ZeroDivisionError
    assert len(job_ids(redis_client)) == 2


@pytest.mark.django_db(transaction=True)
def test_unique_keys_inside_atomic_see_pending_jobs_and_each_other(redis_client: redis.Redis):
    holder = digest.delay(1)
    with transaction.atomic():
        single = digest.delay(2)  # waits for the same commit
        jobs = digest.delay_many([((1,), {}), ((2,), {}), ((3,), {}), ((3,), {})])
        assert jobs[0].id == holder.id
        assert jobs[1].id == single.id
        assert jobs[2] is jobs[3]
        again = digest.delay(3)  # a later single delay sees the batch's pending job
        assert again.id == jobs[2].id
    assert job_ids(redis_client) == {holder.id, single.id, jobs[2].id}


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_transaction_leaves_no_pending_holder_behind(redis_client: redis.Redis):
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        dropped = digest.delay(7)
        dropped_many = digest.delay_many([((8,), {})])[0]
        raise ZeroDivisionError
    with transaction.atomic():  # a new transaction: the rolled-back jobs hold nothing
        fresh = digest.delay(7)
        fresh_many = digest.delay_many([((8,), {})])[0]
        assert {fresh.id, fresh_many.id}.isdisjoint({dropped.id, dropped_many.id})
    assert job_ids(redis_client) == {fresh.id, fresh_many.id}


@pytest.mark.django_db(transaction=True)
def test_a_batch_dropped_with_its_savepoint_does_not_hold_its_keys(redis_client: redis.Redis):
    with transaction.atomic():
        with pytest.raises(ZeroDivisionError), transaction.atomic():
            dropped = digest.delay_many([((9,), {})])[0]
            raise ZeroDivisionError
        kept = digest.delay(9)
        assert kept.id != dropped.id
    assert job_ids(redis_client) == {kept.id}


@pytest.mark.django_db(transaction=True)
def test_after_commit_a_finished_holder_no_longer_holds_the_key(redis_client: redis.Redis):
    with transaction.atomic():
        first = digest.delay(10)
    get_job(first.id).delete()  # type: ignore[union-attr]
    with transaction.atomic():
        second = digest.delay(10)
        assert second.id != first.id
    assert job_ids(redis_client) == {second.id}


def test_delay_and_delay_many_keep_the_job_functions_return_type(settings: Settings):
    settings.RQUEUE = {**settings.RQUEUE, "EAGER": True}
    one = add.delay(1, y=2)
    many = add.delay_many([((3,), {})])
    assert_type(one, Job[int])  # checked by mypy (a CI gate), a no-op at run time
    assert_type(many, list[Job[int]])
    assert (one.result, many[0].result) == (3, 3)


def test_eager_runs_each_call_inline(settings: Settings, redis_client: redis.Redis):
    settings.RQUEUE = {**settings.RQUEUE, "EAGER": True}
    calls.clear()
    jobs = add.delay_many([((1,), {"y": 1}), ((2,), {})])
    assert calls == [(1, 1), (2, 0)]
    assert [(j.status, j.result) for j in jobs] == [
        (JobStatus.SUCCEEDED, 2),
        (JobStatus.SUCCEEDED, 2),
    ]
    assert redis_client.dbsize() == 0


def _batch(client: redis.Redis, items: list[transitions.BatchItem], batch_size: int) -> list[str]:
    shared = EnqueueShared(KEYS, (0, "", 0, -1), 0, ("n", "x", "queue", "default")).batch()
    replies = transitions.enqueue_batch(client, shared, items, batch_size=batch_size)
    return [outcome for outcome, _, _ in replies]


def test_enqueue_batch_reloads_the_script_after_a_script_flush(redis_client: redis.Redis):
    items = [transitions.BatchItem(f"default:{i:032x}", "", '{"a":[],"k":{}}') for i in range(3)]
    redis_client.script_flush()
    first = _batch(redis_client, items[:2], batch_size=1)
    redis_client.script_flush()  # as after a Redis restart
    rest = _batch(redis_client, items, batch_size=2)
    assert first == ["created", "created"]
    assert rest == ["exists", "exists", "created"]  # a resent item is a no-op
    stored = redis_client.hgetall(KEYS.job(items[2].job_id))
    assert stored[b"p"] == b'{"a":[],"k":{}}' and stored[b"n"] == b"x"
    assert stored[b"s"] == b"queued"


def test_enqueue_batch_refuses_malformed_arguments_before_writing(redis_client: redis.Redis):
    script = load("enqueue_batch")
    head = [KEYS.base, KEYS.prios, KEYS.delayed, KEYS.stats, KEYS.notify, KEYS.wake]
    shared: list[str | int | float] = [0, "", 0, -1, 0, 0]
    one = ["default:" + "0" * 32, "[]"]
    with pytest.raises(redis.ResponseError, match="bad unique flag"):
        script(redis_client, head, [*shared, 2, *one])
    with pytest.raises(redis.ResponseError, match="items are not whole"):
        script(redis_client, head, [*shared, 1, *one])  # flag 1: each item needs a unique key
    with pytest.raises(redis.ResponseError, match="bad priority"):
        script(redis_client, head, [101, *shared[1:], 0, *one])
    with pytest.raises(redis.ResponseError, match="bad shared field count"):
        script(redis_client, head, [*shared[:5], -1, 0, *one])
    assert redis_client.dbsize() == 0


def test_enqueue_batch_links_its_jobs_like_one_by_one_enqueues(redis_client: redis.Redis):
    """One RPUSH per batch keeps FIFO order, counts, ring and wake-up tokens as enqueue.lua does."""
    items = [transitions.BatchItem(f"default:{i:032x}", "", "[]") for i in range(1500)]
    assert set(_batch(redis_client, items, batch_size=1500)) == {"created"}
    queued = redis_client.lrange(KEYS.group(0, ""), 0, -1)
    assert queued == [item.job_id.encode() for item in items]
    assert redis_client.lrange(KEYS.ring(0), 0, -1) == [b""]
    assert redis_client.zrange(KEYS.prios, 0, -1) == [b"0"]
    assert redis_client.hget(KEYS.stats, "queued") == b"1500"
    assert redis_client.hget(KEYS.stats, "enqueued") == b"1500"
    assert redis_client.llen(KEYS.notify) == 64  # bounded, as one job at a time
    record = redis_client.hgetall(KEYS.job(items[0].job_id))
    assert b"due" not in record  # due now: readers take the enqueue time ("at")
    later = [transitions.BatchItem(f"default:{i:032x}", "", "[]") for i in range(2000, 2003)]
    shared = EnqueueShared(KEYS, (0, "", 60_000, -1), 0, ("n", "x")).batch()
    replies = transitions.enqueue_batch(redis_client, shared, later)
    assert {state for _, _, state in replies} == {"scheduled"}
    due: list[tuple[bytes, float]] = redis_client.zrange(KEYS.delayed, 0, -1, withscores=True)  # type: ignore[assignment]
    assert [member for member, _ in due] == sorted(item.job_id.encode() for item in later)
    assert len({score for _, score in due}) == 1
    assert redis_client.llen(KEYS.wake) == 1
    assert redis_client.hget(KEYS.stats, "enqueued") == b"1503"


# -- adelay() -----------------------------------------------------------------------


def test_a_job_id_names_one_job_so_delay_many_refuses_it(redis_client: redis.Redis):
    with pytest.raises(ValueError, match=r"names one job: enqueue it with \.delay\(\)"):
        carry.using(job_id="one").delay_many([(("a",), {}), (("b",), {})])
    assert job_ids(redis_client) == set()
