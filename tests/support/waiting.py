"""Polling helper for tests that wait on other processes (workers, Redis)."""

import time
from collections.abc import Callable


def wait_until[T](
    predicate: Callable[[], T],
    timeout: float = 5.0,
    interval: float = 0.01,
    message: str = "",
) -> T:
    """Call ``predicate`` until it returns a truthy value and return that value.

    Raise ``AssertionError`` (with ``message`` and the last value seen) if it is
    still falsy after ``timeout`` seconds. The predicate is always tried one
    last time at the deadline, so a slow machine never fails on a race with
    the final sleep.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        time.sleep(min(interval, remaining))
    value = predicate()
    if value:
        return value
    detail = f": {message}" if message else ""
    raise AssertionError(f"condition not met within {timeout:.2f}s{detail} (last value: {value!r})")
