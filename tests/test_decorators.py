"""@job and .using() (django_rqueue.decorators): decoration, options and their validation.

``.delay()`` itself is tested in tests/enqueue/."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Coroutine
from typing import Any, assert_type

import pytest
import redis
from pytest_django.fixtures import Settings

from django_rqueue import (
    AsyncContextJobFunction,
    AsyncJobFunction,
    Job,
    JobContext,
    JobFunction,
    job,
    registry,
)
from tests.enqueue.jobs import configured

calls: list[tuple[object, ...]] = []


pytestmark = pytest.mark.usefixtures("worker_may_close_db_connections")


@job
def bare(x: int) -> int:
    calls.append((x,))
    return x * 2


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


# -- async job functions ------------------------------------------------------------


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
