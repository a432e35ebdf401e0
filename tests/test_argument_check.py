"""Arguments are checked against the job function's signature at enqueue, on a real
redis-server: a call the function could not accept raises ``TypeError`` at the caller and
writes nothing (``.delay()``, ``adelay()``, ``delay_many()``, ``using().delay()`` and the
``django.tasks`` backend's ``enqueue()``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis

from django_rqueue import JobContext, job
from tests.jobs_app.tasks import context_task


@job
def charge(order_id: int, fail_rate: float = 0.0) -> None:
    return None


@job(takes_context=True)
def with_context(context: JobContext, user_id: int, *, notify: bool) -> None:
    return None


@job
def anything(*args: Any, **kwargs: Any) -> None:
    return None


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((), {}, r"charge\(order_id, fail_rate=0.0\) cannot be called with "
         r"these arguments: missing a required argument: 'order_id'"),
        ((1, 0.5, 3), {}, "too many positional arguments"),
        ((1,), {"fail_rat": 0.5}, "got an unexpected keyword argument 'fail_rat'"),
        ((1,), {"order_id": 2}, "multiple values for argument 'order_id'"),
    ],
)  # fmt: skip
def test_delay_refuses_arguments_the_function_cannot_take_and_writes_nothing(
    args: tuple[Any, ...], kwargs: dict[str, Any], message: str, redis_client: redis.Redis
) -> None:
    with pytest.raises(TypeError, match=message):
        charge.delay(*args, **kwargs)
    with pytest.raises(TypeError, match=message):
        charge.using(priority=5, delay=10).delay(*args, **kwargs)
    assert redis_client.dbsize() == 0


def test_delay_accepts_every_call_the_function_accepts(redis_client: redis.Redis) -> None:
    charge.delay(1)
    charge.delay(1, 0.5)
    charge.delay(order_id=1, fail_rate=0.5)
    anything.delay()
    anything.delay(1, 2, x=3)
    with_context.delay(7, notify=True)
    assert redis_client.zcard("rqueue:{default}:prios") == 1
    assert len(list(redis_client.scan_iter(match="rqueue:{default}:job:*"))) == 6


def test_the_context_parameter_is_left_out_for_takes_context(redis_client: redis.Redis) -> None:
    with pytest.raises(TypeError, match="missing a required keyword-only argument: 'notify'"):
        with_context.delay(7)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"with_context\(user_id, \*, notify\)"):
        with_context.delay(7, 8, notify=True)  # type: ignore[misc, arg-type]
    assert redis_client.dbsize() == 0


def test_adelay_checks_the_signature_before_writing(redis_client: redis.Redis) -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'user'"):
        asyncio.run(charge.adelay(1, user=2))  # type: ignore[call-arg]
    assert redis_client.dbsize() == 0


def test_delay_many_names_the_index_of_the_bad_call_and_writes_nothing(
    redis_client: redis.Redis,
) -> None:
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [((1,), {}), ((2,), {}), ((), {})]
    with pytest.raises(TypeError, match="call 2: .*missing a required argument: 'order_id'"):
        charge.delay_many(calls)
    assert redis_client.dbsize() == 0


def test_the_django_tasks_backend_checks_the_task_signature(redis_client: redis.Redis) -> None:
    with pytest.raises(TypeError, match="missing a required argument: 'tag'"):
        context_task.enqueue("ledger")  # type: ignore[call-arg]
    assert redis_client.dbsize() == 0


def test_a_function_without_a_readable_signature_is_not_checked() -> None:
    from django_rqueue.argument_check import ArgumentCheck

    assert ArgumentCheck.of(print) is not None  # builtins with a text signature are checked
    assert ArgumentCheck.of(dict) is None  # no signature: every call is accepted


def _f1(a: int, b: int = 0, /, c: int = 1, *, d: int, e: int = 2) -> None: ...
def _f2(a: int, *rest: int, b: int = 0, **more: int) -> None: ...
def _f3(a: int, b: int, c: int = 0) -> None: ...


@pytest.mark.parametrize("func", [_f1, _f2, _f3])
def test_the_quick_paths_agree_with_signature_bind(func: Any) -> None:
    import inspect
    import itertools

    from django_rqueue.argument_check import ArgumentCheck

    check = ArgumentCheck.of(func)
    assert check is not None
    names = ["a", "b", "c", "d", "e", "x"]
    for count in range(5):
        for size in range(4):
            for keys in itertools.combinations(names, size):
                args, kwargs = tuple(range(count)), dict.fromkeys(keys, 0)
                try:
                    inspect.signature(func).bind(*args, **kwargs)
                    expected = True
                except TypeError:
                    expected = False
                try:
                    check("f", args, kwargs)
                    accepted = True
                except TypeError:
                    accepted = False
                assert accepted is expected, (args, kwargs)
