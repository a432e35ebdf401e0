"""Retry delays: the named policies (:data:`NAMED`) and callables.

``"exponential"`` (the default) is "full jitter" from Marc Brooker, *Exponential Backoff
And Jitter* (AWS Architecture Blog, 2015): the delay before attempt ``n + 1``
is uniform in ``[0, min(CAP, BASE * 2 ** (n - 1))]`` seconds, which spreads
retries of many failing jobs instead of having them return in lock-step.

``"odd_minutes"`` is the schedule of many notification services: "notify again
after 1, 3, 5, 7 minutes" (its interval ``2n + 1`` minutes for n = 0, 1, ...), without
jitter, for callbacks to a partner's endpoint where a predictable schedule is
part of the contract (``django_rqueue.contrib.webhooks`` uses it).
"""

from __future__ import annotations

import random
from collections.abc import Callable

#: The upper bound of the first retry's delay, in seconds.
BASE = 2.0
#: The longest exponential delay, in seconds (one hour).
CAP = 3600.0

BackoffPolicy = str | Callable[[int, BaseException], float | int | None]


def exponential(attempt: int, exception: BaseException) -> float:
    """Full-jitter delay in seconds after failed attempt number ``attempt`` (1-based)."""
    ceiling = min(CAP, BASE * 2 ** min(attempt - 1, 32))
    return random.uniform(0, ceiling)  # noqa: S311 - jitter, not cryptography


def odd_minutes(attempt: int, exception: BaseException) -> float:
    """1, 3, 5, 7, ... minutes: ``2 * attempt - 1`` minutes in seconds after failed attempt
    number ``attempt`` (1-based): 60, 180, 300, 420, ... s."""
    return 60.0 * (2 * attempt - 1)


#: The policies a job's or a queue's ``backoff`` may name.
NAMED: dict[str, Callable[[int, BaseException], float]] = {
    "exponential": exponential,
    "odd_minutes": odd_minutes,
}


def retry_delay(policy: BackoffPolicy, attempt: int, exception: BaseException) -> float | None:
    """Return seconds to wait before the next attempt, or ``None`` to stop retrying.

    ``policy`` is a name in :data:`NAMED` or a callable ``(attempt, exception) ->
    seconds | None``. A callable that raises or returns something other than
    a non-negative number or ``None`` is a bug in the caller's code: it is
    reported as ``TypeError``/``ValueError``.
    """
    named = NAMED.get(policy) if isinstance(policy, str) else None
    if named is not None:
        return named(attempt, exception)
    if isinstance(policy, str) or not callable(policy):
        raise ValueError(f"unknown backoff {policy!r}; use one of {sorted(NAMED)} or a callable")
    delay = policy(attempt, exception)
    if delay is None:
        return None
    if isinstance(delay, bool) or not isinstance(delay, int | float) or delay < 0:
        raise ValueError(f"backoff returned {delay!r}; expected seconds >= 0 or None")
    return float(delay)
