"""``.delay()`` on a real redis-server: the job written with its options, scheduling
(``delay``, ``run_at``), expiry, the payload limit, a caller-chosen job id, and Redis
unreachable. Unique keys and transactions are in test_unique_and_commit.py; the decorator's
options and their validation in tests/test_decorators.py."""

from __future__ import annotations

import datetime
import socket
import time
import zoneinfo
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from asgiref.sync import async_to_sync
from django.utils import timezone
from pytest_django.fixtures import Settings

from django_rqueue import (
    CancelReason,
    JobStatus,
    RedisUnavailable,
    RqueueError,
    get_job,
    job,
)
from django_rqueue.engine.keys import QueueKeys
from django_rqueue.worker.loop import Worker
from django_rqueue.worker.poller import Poller
from tests.enqueue.jobs import (
    bare,
    calls,
    carry,
    configured,
    job_hash,
    job_ids,
    server_ms,
    work_one,
)
from tests.support import transitions
from tests.support.waiting import wait_until

KEYS = QueueKeys.of("rqueue", "default")
TOKYO = zoneinfo.ZoneInfo("Asia/Tokyo")


pytestmark = pytest.mark.usefixtures("worker_may_close_db_connections")


# -- delay ------------------------------------------------------------------------------


def test_delay_persists_the_job_and_returns_it(redis_client: redis.Redis):
    queued = bare.delay(5)
    assert queued.id.startswith("default:")
    assert queued.status is JobStatus.QUEUED
    assert (queued.name, queued.queue, queued.args, queued.kwargs) == (
        bare.name,
        "default",
        [5],
        {},
    )
    record = job_hash(redis_client, queued.id)
    assert record["s"] == "queued"
    assert record["n"] == bare.name
    # The built-in max_attempts, timeout and result_ttl are left out of the record ...
    assert not {"max", "tmo", "ttl"} & record.keys()
    got = get_job(queued.id)  # ... and read back as those defaults.
    assert got is not None
    assert (got.max_attempts, got.timeout, got.result_ttl) == (3, 300.0, 86400)
    assert redis_client.lrange(KEYS.group(0, ""), 0, -1) == [queued.id.encode()]


def test_decorator_options_reach_redis(redis_client: redis.Redis):
    queued = configured.delay("a@example.com")
    assert queued.queue == "emails"
    record = job_hash(redis_client, queued.id, "emails")
    assert (record["prio"], record["max"], record["tmo"], record["ttl"]) == (
        "10",
        "9",
        "7000",
        "60",
    )


def test_using_returns_a_bound_copy_and_leaves_the_job_alone(redis_client: redis.Redis):
    bound = configured.using(priority=-5, group="user:1", max_attempts=2)
    assert bound is not configured
    assert bound.name == configured.name
    assert configured.options.priority == 10
    low = bound.using(queue="low").delay("x")  # options accumulate
    record = job_hash(redis_client, low.id, "low")
    assert (record["prio"], record["group"], record["max"]) == ("-5", "user:1", "2")
    plain = job_hash(redis_client, configured.delay("y").id, "emails")
    assert (plain["prio"], "group" in plain) == ("10", False)  # the default group is left out


def test_queue_options_apply_when_the_job_sets_none(settings: Settings, redis_client: redis.Redis):
    settings.RQUEUE = {
        **settings.RQUEUE,
        "DEFAULTS": {"max_attempts": 4},
        "QUEUES": {"default": {}, "emails": {"timeout": 3, "max_attempts": 6}, "low": {}},
    }
    record = job_hash(redis_client, bare.using(queue="emails").delay(1).id, "emails")
    assert (record["max"], record["tmo"]) == ("6", "3000")
    assert job_hash(redis_client, bare.delay(1).id)["max"] == "4"


@pytest.mark.parametrize("how", ["decorator", "using"])
def test_an_undeclared_queue_is_a_value_error_with_nothing_written(
    how: str, redis_client: redis.Redis
):
    target = job(queue="nowhere")(lambda x: x) if how == "decorator" else bare.using(queue="x")
    with pytest.raises(ValueError, match="is not declared"):
        target.delay(1)
    assert redis_client.dbsize() == 0


@pytest.mark.parametrize("delay", [30, 30.0, datetime.timedelta(seconds=30)])
def test_delay_in_seconds_or_timedelta_schedules_the_job(delay: object, redis_client: redis.Redis):
    before = server_ms(redis_client)
    scheduled = bare.using(delay=delay).delay(1)  # type: ignore[arg-type]
    after = server_ms(redis_client)
    assert scheduled.status is JobStatus.SCHEDULED
    run_at = redis_client.zscore(KEYS.delayed, scheduled.id)
    assert run_at is not None
    assert before + 30_000 <= run_at <= after + 30_000
    assert transitions.reserve(redis_client, KEYS, lease_ms=1000, worker_id="w") is None


def test_an_aware_run_at_is_kept_to_the_millisecond(redis_client: redis.Redis):
    when = datetime.datetime.now(TOKYO).replace(microsecond=123000) + datetime.timedelta(hours=2)
    scheduled = bare.using(run_at=when).delay(1)
    assert scheduled.status is JobStatus.SCHEDULED
    assert redis_client.zscore(KEYS.delayed, scheduled.id) == int(when.timestamp() * 1000)
    got = get_job(scheduled.id)
    assert got is not None
    assert got.run_at == when


def test_a_naive_run_at_is_read_in_the_current_time_zone(redis_client: redis.Redis):
    naive = datetime.datetime.now(TOKYO).replace(tzinfo=None, microsecond=0)
    naive += datetime.timedelta(hours=1)
    with timezone.override(TOKYO):
        scheduled = bare.using(run_at=naive).delay(1)
    expected = naive.replace(tzinfo=TOKYO)
    assert redis_client.zscore(KEYS.delayed, scheduled.id) == expected.timestamp() * 1000
    got = get_job(scheduled.id)
    assert got is not None
    assert got.run_at == expected


def test_one_bound_naive_run_at_follows_the_time_zone_of_each_call(redis_client: redis.Redis):
    naive = datetime.datetime.now(TOKYO).replace(tzinfo=None, microsecond=0)
    naive += datetime.timedelta(days=1)
    later = bare.using(run_at=naive)  # one bound function, called under two time zones
    with timezone.override(TOKYO):
        tokyo = later.delay(1)
    with timezone.override(datetime.UTC):
        utc = later.delay(1)
    assert (
        redis_client.zscore(KEYS.delayed, tokyo.id)
        == naive.replace(tzinfo=TOKYO).timestamp() * 1000
    )
    assert redis_client.zscore(KEYS.delayed, utc.id) == (
        naive.replace(tzinfo=datetime.UTC).timestamp() * 1000
    )


def test_the_queue_settings_apply_from_the_next_call(settings: Settings):
    first = bare.delay(1)
    settings.RQUEUE = {**settings.RQUEUE, "DEFAULTS": {"max_attempts": 7, "timeout": 12}}
    second = bare.delay(1)
    third = bare.delay(1)
    got = [get_job(j.id) for j in (first, second, third)]
    assert [(j.max_attempts, j.timeout) for j in got if j] == [(3, 300.0), (7, 12.0), (7, 12.0)]


@job(expires=datetime.timedelta(minutes=10))
def perishable(x: int) -> int:
    return x


@pytest.mark.parametrize("expires", [600, 600.0, datetime.timedelta(minutes=10), None])
def test_expires_in_seconds_or_timedelta_counts_from_the_enqueue_on_the_redis_clock(
    expires: object, redis_client: redis.Redis
):
    sent = perishable.using(expires=expires).delay(1)  # type: ignore[arg-type]  # None: @job's
    assert sent.expires_at is None  # the deadline is the Redis clock's: known once read
    record = job_hash(redis_client, sent.id)
    assert int(record["exp"]) == int(record["at"]) + 600_000
    got = get_job(sent.id)
    assert got is not None and got.enqueued_at is not None
    assert got.expires_at == got.enqueued_at + datetime.timedelta(minutes=10)
    assert got.cancel_reason is None


def test_an_aware_expires_datetime_is_kept_to_the_millisecond(redis_client: redis.Redis):
    when = datetime.datetime.now(TOKYO).replace(microsecond=456000) + datetime.timedelta(hours=1)
    sent = bare.using(expires=when).delay(1)
    assert sent.expires_at == when
    assert job_hash(redis_client, sent.id)["exp"] == str(int(when.timestamp() * 1000))
    got = get_job(sent.id)
    assert got is not None and got.expires_at == when


def test_a_job_without_expires_never_expires(redis_client: redis.Redis):
    sent = bare.delay(1)
    assert "exp" not in job_hash(redis_client, sent.id)
    got = get_job(sent.id)
    assert got is not None and got.expires_at is None


def test_an_expired_job_is_never_run_and_reads_as_cancelled_expired(redis_client: redis.Redis):
    calls.clear()
    gone = bare.using(expires=timezone.now() - datetime.timedelta(seconds=1)).delay(7)
    kept = bare.delay(8)
    work_one()
    assert calls == [(8,)]
    got = get_job(gone.id)
    assert got is not None
    assert (got.status, got.cancel_reason) == (JobStatus.CANCELLED, CancelReason.EXPIRED)
    assert got.attempts == 0 and got.error is None and got.finished_at is not None
    assert get_job(kept.id) is not None


def test_waiting_on_a_job_that_expires_returns_it_cancelled(redis_client: redis.Redis):
    gone = bare.using(expires=0.2).delay(1)
    wait_until(
        lambda: server_ms(redis_client) >= int(job_hash(redis_client, gone.id)["exp"]),
        message="the job's expiry came",
    )
    waiter = Worker(["default"], with_poller=False)
    assert not waiter.work_once()  # nothing to run: the job expired when reserved
    done = gone.wait(5)
    assert (done.status, done.cancel_reason) == (JobStatus.CANCELLED, CancelReason.EXPIRED)


def test_a_run_at_in_the_past_is_queued_at_once(redis_client: redis.Redis):
    queued = bare.using(run_at=timezone.now() - datetime.timedelta(minutes=5)).delay(1)
    assert queued.status is JobStatus.QUEUED
    assert redis_client.zcard(KEYS.delayed) == 0
    got = transitions.reserve(redis_client, KEYS, lease_ms=1000, worker_id="w")
    assert got is not None
    assert got[0] == queued.id


def test_a_short_delay_becomes_runnable_after_it(redis_client: redis.Redis):
    scheduled = bare.using(delay=0.2).delay(1)
    run_at = redis_client.zscore(KEYS.delayed, scheduled.id)
    poller = Poller(["default"])

    def promoted() -> bool:
        poller.run_once()
        return job_hash(redis_client, scheduled.id)["s"] == "queued"

    wait_until(promoted, message="promoted after its delay")
    assert run_at is not None
    assert server_ms(redis_client) >= run_at


# -- Redis down --------------------------------------------------------------------------------


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def blackholed_port() -> Iterator[int]:
    """A port whose SYNs are dropped: a listener that never accepts, its backlog full."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = int(listener.getsockname()[1])
    fillers = []
    for _ in range(8):
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(("127.0.0.1", port))
        fillers.append(filler)
    probe = socket.create_connection
    try:
        probe(("127.0.0.1", port), timeout=0.3).close()
    except OSError:
        pass  # blackholed, as wanted
    else:
        pytest.skip("this kernel accepts connections beyond the listen backlog")
    try:
        yield port
    finally:
        for sock in [*fillers, listener]:
            sock.close()


@pytest.mark.parametrize("kind", ["closed", "blackholed"])
def test_delay_raises_redis_unavailable_within_about_two_seconds(
    kind: str, request: pytest.FixtureRequest, settings: Settings
):
    port = request.getfixturevalue(f"{kind}_port")
    settings.RQUEUE = {**settings.RQUEUE, "REDIS_URL": f"redis://127.0.0.1:{port}/0"}
    started = time.monotonic()
    with pytest.raises(RedisUnavailable) as info:
        bare.delay(1)
    assert time.monotonic() - started <= 2.5
    assert isinstance(info.value, RqueueError)
    assert "unreachable" in str(info.value)


# -- payload and job id ------------------------------------------------------------------


def test_arguments_larger_than_max_payload_bytes_raise_and_write_nothing(
    redis_client: redis.Redis, settings: Settings
):
    settings.RQUEUE = {**settings.RQUEUE, "MAX_PAYLOAD_BYTES": 100}
    fits = carry.delay("x" * 90)  # ["xxx…"]: 94 bytes
    with pytest.raises(ValueError, match=r"take 204 bytes as JSON, more than .*\(100\)"):
        carry.delay("y" * 200)
    with pytest.raises(ValueError, match=r"^call 1: .* take 204 bytes"):
        carry.delay_many([(("z",), {}), (("y" * 200,), {})])
    with pytest.raises(ValueError, match="take 204 bytes"):
        async_to_sync(carry.adelay)("y" * 200)
    assert job_ids(redis_client) == {fits.id}


def test_the_payload_limit_is_one_mib_by_default_and_none_lifts_it(
    redis_client: redis.Redis, settings: Settings
):
    with pytest.raises(ValueError, match=r"more than RQUEUE\['MAX_PAYLOAD_BYTES'\] \(1048576\)"):
        carry.delay("y" * 1_048_576)
    settings.RQUEUE = {**settings.RQUEUE, "MAX_PAYLOAD_BYTES": None}
    big = carry.delay("y" * 1_048_576)
    assert job_ids(redis_client) == {big.id}
    # ... up to the 64 MiB of JSON a worker decodes (serialization.MAX_JSON_BYTES).
    with pytest.raises(ValueError, match=r"more than RQUEUE\['MAX_PAYLOAD_BYTES'\] \(67108864\)"):
        carry.delay("y" * 64 * 1024 * 1024)
    assert job_ids(redis_client) == {big.id}


def test_a_caller_chosen_job_id_makes_a_retried_enqueue_write_nothing(
    redis_client: redis.Redis, enqueued: list[str]
):
    first = carry.using(job_id="order-42.receipt").delay("first")
    assert first.id == "default:order-42.receipt"
    again = carry.using(job_id="order-42.receipt").delay("second")  # the caller's retry
    assert again.id == first.id and again.args == ["first"]  # the job already there
    assert again.status is JobStatus.QUEUED
    assert job_ids(redis_client) == {first.id}
    assert enqueued == [first.id]  # job_enqueued once
    stored = get_job(first.id)
    assert stored is not None and stored.args == ["first"]
    other_queue = carry.using(job_id="order-42.receipt", queue="emails").delay("x")
    assert other_queue.id == "emails:order-42.receipt"
    again_async = async_to_sync(carry.using(job_id="order-42.receipt").adelay)("third")
    assert again_async.id == first.id and again_async.args == ["first"]


@pytest.mark.parametrize("bad", ["", "a b", "x" * 129, "brace{tag}", 42])
def test_a_bad_job_id_is_refused_naming_the_rule(bad: Any):
    with pytest.raises(ValueError, match="job_id must be 1 to 128 of the characters"):
        carry.using(job_id=bad)
