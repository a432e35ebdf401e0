"""Retry delays.

``"exponential"`` is "full jitter" from Marc Brooker, *Exponential Backoff
And Jitter* (AWS Architecture Blog, 2015): the delay before attempt ``n + 1``
is uniform in ``[0, min(CAP, BASE * 2 ** (n - 1))]`` seconds, which spreads
retries of many failing jobs instead of having them return in lock-step.
"""

from __future__ import annotations

import random
from collections.abc import Callable

#: Seconds: the upper bound of the first retry's delay.
BASE = 2.0
#: Seconds: no exponential delay exceeds this (one hour).
CAP = 3600.0

BackoffPolicy = str | Callable[[int, BaseException], float | int | None]


def exponential(attempt: int, exception: BaseException) -> float:
    """Full-jitter delay in seconds after failed attempt number ``attempt`` (1-based)."""
    ceiling = min(CAP, BASE * 2 ** min(attempt - 1, 32))
    return random.uniform(0, ceiling)  # noqa: S311 - jitter, not cryptography


def retry_delay(policy: BackoffPolicy, attempt: int, exception: BaseException) -> float | None:
    """Return seconds to wait before the next attempt, or ``None`` to stop retrying.

    ``policy`` is ``"exponential"`` or a callable ``(attempt, exception) ->
    seconds | None``. A callable that raises or returns something other than
    a non-negative number or ``None`` is a bug in the caller's code: it is
    reported as ``TypeError``/``ValueError``.
    """
    if policy == "exponential":
        return exponential(attempt, exception)
    if not callable(policy):
        raise ValueError(f"unknown backoff {policy!r}; use 'exponential' or a callable")
    delay = policy(attempt, exception)
    if delay is None:
        return None
    if isinstance(delay, bool) or not isinstance(delay, int | float) or delay < 0:
        raise ValueError(f"backoff returned {delay!r}; expected seconds >= 0 or None")
    return float(delay)
