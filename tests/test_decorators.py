"""@job, .using() and .delay() (django_rqueue.decorators) against a real redis-server."""

from __future__ import annotations

import asyncio
import datetime
import socket
import time
import zoneinfo
from collections.abc import Coroutine, Iterator
from typing import Any, assert_type

import pytest
import redis
from django.db import transaction
from django.utils import timezone
from pytest_django.fixtures import Settings

from django_rqueue import (
    AsyncContextJobFunction,
    AsyncJobFunction,
    CancelReason,
    Job,
    JobContext,
    JobFunction,
    JobStatus,
    RedisUnavailable,
    RqueueError,
    get_job,
    job,
    registry,
)
from django_rqueue.engine.keys import QueueKeys
from django_rqueue.worker.loop import Worker
from django_rqueue.worker.poller import Poller
from tests.support import transitions
from tests.support.waiting import wait_until

KEYS = QueueKeys.of("rqueue", "default")
TOKYO = zoneinfo.ZoneInfo("Asia/Tokyo")
calls: list[tuple[object, ...]] = []


pytestmark = pytest.mark.usefixtures("worker_may_close_db_connections")


@job
def bare(x: int) -> int:
    calls.append((x,))
    return x * 2


@job(name="custom.name", queue="emails", priority=10, timeout=7, max_attempts=9, result_ttl=60)
def configured(to: str) -> None:
    return None


@job(unique_key=lambda user_id: f"report:{user_id}")
def report(user_id: int) -> None:
    return None


@job(max_attempts=1)
def explode() -> None:
    raise RuntimeError("boom")


def _server_ms(client: redis.Redis) -> int:
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def _record(client: redis.Redis, job_id: str, queue: str = "default") -> dict[str, str]:
    raw: dict[bytes, bytes] = client.hgetall(QueueKeys.of("rqueue", queue).job(job_id))  # type: ignore[assignment]
    return {k.decode(): v.decode() for k, v in raw.items()}


def _work_one() -> None:
    assert Worker(["default"], with_poller=False).work_once()


def _job_ids(client: redis.Redis) -> set[str]:
    prefix = KEYS.job("")
    return {k.decode()[len(prefix) :] for k in client.scan_iter(match=prefix + "*")}


# -- decoration ---------------------------------------------------------------------


def test_bare_decoration_registers_the_job_under_its_dotted_name():
    assert isinstance(bare, JobFunction)
    assert bare.name == "tests.test_decorators.bare"
    assert registry.get(bare.name) is bare
    assert configured.name == "custom.name"
    assert registry.get("custom.name") is configured


def test_a_plain_call_runs_inline_and_writes_nothing(redis_client: redis.Redis):
    calls.clear()
    assert bare(21) == 42
    assert calls == [(21,)]
    assert redis_client.dbsize() == 0


@pytest.mark.parametrize(
    "options",
    [
        {"priority": 101},
        {"priority": -101},
        {"priority": 1.5},
        {"priority": True},
        {"timeout": 0},
        {"max_attempts": 0},
        {"max_attempts": 2.0},
        {"result_ttl": -1},
        {"unique_ttl": 0},
        {"backoff": "linear"},
        {"queue": 5},
        {"expires": 0},
        {"expires": datetime.timedelta(0)},
        {"expires": datetime.datetime(2030, 1, 1)},  # naive
        {"expires": "1h"},
    ],
)
def test_bad_options_are_refused_at_decoration(options: dict[str, object]):
    with pytest.raises(ValueError):
        job(**options)(lambda: None)  # type: ignore[call-overload]


def test_priority_out_of_range_is_refused_at_decoration_with_a_clear_message():
    with pytest.raises(ValueError, match="priority must be between -100 and 100, got 200"):

        @job(priority=200)
        def too_high() -> None: ...


@pytest.mark.parametrize(
    "options",
    [
        {"priority": 101},
        {"priority": -101},
        {"delay": -1},
        {"delay": "soon"},
        {"run_at": "2030-01-01"},
        {"group": "g" * 201},
        {"group": 5},
        {"unique_key": "k" * 201},
        {"on_commit": "yes"},
        {"timeout": -3},
        {"expires": -5},
        {"expires": 0.0},
        {"expires": float("nan")},
        {"expires": float("inf")},
        {"expires": True},
        {"expires": datetime.timedelta(seconds=-1)},
        {"expires": datetime.datetime(2030, 1, 1)},  # naive
        {"expires": datetime.date(2030, 1, 1)},
    ],
)
def test_bad_options_are_refused_at_using(options: dict[str, object], redis_client: redis.Redis):
    with pytest.raises(ValueError):
        bare.using(**options)  # type: ignore[arg-type]
    assert redis_client.dbsize() == 0


def test_a_bad_expires_says_what_is_expected():
    with pytest.raises(ValueError, match=r"expires must be an aware datetime"):
        bare.using(expires=datetime.datetime(2030, 1, 1))
    with pytest.raises(ValueError, match=r"expires must be a number of seconds > 0.*got -1"):
        bare.using(expires=-1)


def test_decorating_something_not_callable_is_a_type_error():
    with pytest.raises(TypeError, match="decorates a function"):
        job(name="x")(42)  # type: ignore[call-overload]


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
    record = _record(redis_client, queued.id)
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
    record = _record(redis_client, queued.id, "emails")
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
    record = _record(redis_client, low.id, "low")
    assert (record["prio"], record["group"], record["max"]) == ("-5", "user:1", "2")
    plain = _record(redis_client, configured.delay("y").id, "emails")
    assert (plain["prio"], "group" in plain) == ("10", False)  # the default group is left out


def test_queue_options_apply_when_the_job_sets_none(settings: Settings, redis_client: redis.Redis):
    settings.RQUEUE = {
        **settings.RQUEUE,
        "DEFAULTS": {"max_attempts": 4},
        "QUEUES": {"default": {}, "emails": {"timeout": 3, "max_attempts": 6}, "low": {}},
    }
    record = _record(redis_client, bare.using(queue="emails").delay(1).id, "emails")
    assert (record["max"], record["tmo"]) == ("6", "3000")
    assert _record(redis_client, bare.delay(1).id)["max"] == "4"


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
    before = _server_ms(redis_client)
    scheduled = bare.using(delay=delay).delay(1)  # type: ignore[arg-type]
    after = _server_ms(redis_client)
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
    record = _record(redis_client, sent.id)
    assert int(record["exp"]) == int(record["at"]) + 600_000
    got = get_job(sent.id)
    assert got is not None and got.enqueued_at is not None
    assert got.expires_at == got.enqueued_at + datetime.timedelta(minutes=10)
    assert got.cancel_reason is None


def test_an_aware_expires_datetime_is_kept_to_the_millisecond(redis_client: redis.Redis):
    when = datetime.datetime.now(TOKYO).replace(microsecond=456000) + datetime.timedelta(hours=1)
    sent = bare.using(expires=when).delay(1)
    assert sent.expires_at == when
    assert _record(redis_client, sent.id)["exp"] == str(int(when.timestamp() * 1000))
    got = get_job(sent.id)
    assert got is not None and got.expires_at == when


def test_a_job_without_expires_never_expires(redis_client: redis.Redis):
    sent = bare.delay(1)
    assert "exp" not in _record(redis_client, sent.id)
    got = get_job(sent.id)
    assert got is not None and got.expires_at is None


def test_an_expired_job_is_never_run_and_reads_as_cancelled_expired(redis_client: redis.Redis):
    calls.clear()
    gone = bare.using(expires=timezone.now() - datetime.timedelta(seconds=1)).delay(7)
    kept = bare.delay(8)
    _work_one()
    assert calls == [(8,)]
    got = get_job(gone.id)
    assert got is not None
    assert (got.status, got.cancel_reason) == (JobStatus.CANCELLED, CancelReason.EXPIRED)
    assert got.attempts == 0 and got.error is None and got.finished_at is not None
    assert get_job(kept.id) is not None


def test_waiting_on_a_job_that_expires_returns_it_cancelled(redis_client: redis.Redis):
    gone = bare.using(expires=0.2).delay(1)
    wait_until(
        lambda: _server_ms(redis_client) >= int(_record(redis_client, gone.id)["exp"]),
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
        return _record(redis_client, scheduled.id)["s"] == "queued"

    wait_until(promoted, message="promoted after its delay")
    assert run_at is not None
    assert _server_ms(redis_client) >= run_at


# -- unique keys ---------------------------------------------------------------------------


def _holder_in(state: str, client: redis.Redis) -> str:
    if state == "scheduled":
        return report.using(delay=3600).delay(7).id
    holder = report.delay(7).id
    if state == "running":
        got = transitions.reserve(client, KEYS, lease_ms=60_000, worker_id="w")
        assert got is not None
        assert got[0] == holder
    return holder


@pytest.mark.parametrize("state", ["scheduled", "queued", "running"])
def test_a_duplicate_returns_the_pending_job_and_enqueues_nothing(
    state: str, redis_client: redis.Redis
):
    holder = _holder_in(state, redis_client)
    ids = _job_ids(redis_client)
    queued_before = redis_client.hget(KEYS.stats, "queued")
    again = report.delay(7)
    assert again.id == holder
    assert again.status == state
    assert _job_ids(redis_client) == ids
    assert redis_client.hget(KEYS.stats, "queued") == queued_before
    assert report.delay(8).id != holder  # another key is another job


def _finish(how: str, job_id: str, client: redis.Redis) -> None:
    got = get_job(job_id)
    assert got is not None
    if how == "cancelled":
        got.cancel()
    elif how == "succeeded":
        _work_one()
    else:  # failed: make it fail its only attempt
        got.delete()
        failing = explode.using(unique_key="report:7").delay()
        _work_one()
        failing.refresh()
        assert failing.status is JobStatus.FAILED


@pytest.mark.parametrize("how", ["succeeded", "failed", "cancelled"])
def test_a_unique_key_is_accepted_again_once_its_job_is_done(how: str, redis_client: redis.Redis):
    first = report.delay(7)
    _finish(how, first.id, redis_client)
    second = report.delay(7)
    assert second.id != first.id
    assert second.status is JobStatus.QUEUED
    assert _record(redis_client, second.id)["uk"] == "report:7"


def test_a_unique_ttl_releases_the_key_after_it_expires(redis_client: redis.Redis):
    first = report.using(unique_ttl=1).delay(7)
    assert report.delay(7).id == first.id

    def a_new_job() -> Job[Any] | None:
        candidate = report.delay(7)
        return candidate if candidate.id != first.id else None

    again = wait_until(a_new_job, timeout=5, message="TTL expiry")
    assert again is not None
    assert again.status is JobStatus.QUEUED
    assert get_job(first.id) is not None  # the first job is still there


# -- transactions -----------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_inside_atomic_nothing_is_written_until_commit(redis_client: redis.Redis):
    with transaction.atomic():
        queued = bare.delay(1)
        scheduled = bare.using(delay=60).delay(2)
        unique = report.delay(3)
        assert redis_client.dbsize() == 0
        assert get_job(queued.id) is None
    ids = _job_ids(redis_client)
    assert ids == {queued.id, scheduled.id, unique.id}  # the returned ids are the final ones
    assert get_job(queued.id).status is JobStatus.QUEUED  # type: ignore[union-attr]
    assert get_job(scheduled.id).status is JobStatus.SCHEDULED  # type: ignore[union-attr]
    assert redis_client.get(KEYS.unique("report:3")) == unique.id.encode()


@pytest.mark.django_db(transaction=True)
def test_a_rollback_writes_nothing(redis_client: redis.Redis):
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        bare.delay(1)
        bare.using(delay=60).delay(2)
        report.delay(3)
        raise ZeroDivisionError
    assert redis_client.dbsize() == 0


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_savepoint_drops_only_its_jobs(redis_client: redis.Redis):
    with transaction.atomic():
        kept = bare.delay(1)
        with pytest.raises(ZeroDivisionError), transaction.atomic():
            bare.delay(2)
            raise ZeroDivisionError
    assert _job_ids(redis_client) == {kept.id}


@pytest.mark.django_db(transaction=True)
def test_on_commit_false_writes_at_once(redis_client: redis.Redis):
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        now = bare.using(on_commit=False).delay(1)
        assert get_job(now.id) is not None
        raise ZeroDivisionError
    assert _job_ids(redis_client) == {now.id}


@pytest.mark.django_db(transaction=True)
def test_a_unique_duplicate_inside_atomic_returns_the_pending_job(redis_client: redis.Redis):
    holder = report.delay(3)
    with transaction.atomic():
        again = report.delay(3)
        assert again.id == holder.id
    assert _job_ids(redis_client) == {holder.id}


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


@pytest.mark.django_db(transaction=True)
def test_two_delays_of_one_unique_key_in_one_transaction_give_one_job(redis_client: redis.Redis):
    with transaction.atomic():
        first = report.delay(4)
        second = report.delay(4)
        assert second.id == first.id  # the id a caller may store in the same transaction
    assert _job_ids(redis_client) == {first.id}
    assert second.id == first.id


@pytest.mark.django_db(transaction=True)
def test_a_unique_key_taken_before_commit_gives_the_holders_id(redis_client: redis.Redis):
    with transaction.atomic():
        pending = report.delay(5)
        holder = report.using(on_commit=False).delay(5)  # e.g. another process, meanwhile
        assert holder.id != pending.id
    assert _job_ids(redis_client) == {holder.id}
    assert pending.id == holder.id  # after commit the returned Job is the one in Redis
    assert pending.status is JobStatus.QUEUED


@pytest.mark.django_db(transaction=True)
def test_a_unique_job_dropped_with_its_savepoint_does_not_block_the_key(redis_client: redis.Redis):
    with transaction.atomic():
        with pytest.raises(ZeroDivisionError), transaction.atomic():
            dropped = report.delay(6)
            raise ZeroDivisionError
        kept = report.delay(6)
        assert kept.id != dropped.id
    assert _job_ids(redis_client) == {kept.id}


@job(max_attempts=2)
async def async_double(x: int) -> int:
    await asyncio.sleep(0)
    return 2 * x


@job(takes_context=True)
async def async_attempt(context: JobContext, x: int) -> int:
    return context.attempt + x


def test_an_async_job_function_types_its_jobs_by_the_awaited_result(settings: Settings):
    """``@job`` on ``async def f(...) -> int`` gives ``Job[int]`` jobs; calling it gives
    the coroutine (checked by mypy, a CI gate; the run-time asserts check the classes)."""
    settings.RQUEUE = {**settings.RQUEUE, "EAGER": True}
    assert isinstance(async_double, AsyncJobFunction) and async_double.is_async
    assert isinstance(async_attempt, AsyncContextJobFunction) and async_attempt.is_async
    one = async_double.delay(2)
    assert_type(one, Job[int])
    assert_type(async_double.using(priority=1).delay_many([((1,), {})]), list[Job[int]])
    assert_type(async_attempt.delay(5), Job[int])
    assert (one.result, async_attempt.delay(5).result) == (4, 6)
    inline = assert_type(async_double(3), Coroutine[Any, Any, int])
    assert asyncio.run(inline) == 6
