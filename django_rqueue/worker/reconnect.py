"""How long a worker process waits between attempts to reach an unreachable Redis.

One policy for every place that retries (the worker loop, the poller, the
master's startup check and its lease renewals, a child's ack or failure
report): exponential backoff with "equal jitter" (redis-py's
``EqualJitterBackoff``: the ``n``-th delay is uniform in ``[d/2, d]`` with
``d = min(cap, base * 2**n)``; AWS Architecture Blog, "Exponential Backoff
And Jitter", 2015). The jitter keeps many workers that lost Redis at the same
moment from reconnecting in lock-step; the floor of ``d/2`` keeps a retry
from coming back at once.
"""

from __future__ import annotations

from redis.backoff import EqualJitterBackoff

#: Seconds: the first delay is between half of this and this.
BASE = 0.1
#: Seconds: no delay is longer, whatever the number of failures.
CAP = 5.0
#: Failures past which the delay no longer grows (it is at ``cap`` long before).
_MAX_EXPONENT = 32


class Reconnect:
    """The delays of one retry loop: :meth:`next_delay` after a failure, :meth:`reset` after
    a success. ``base`` and ``cap`` are seconds (defaults :data:`BASE`, :data:`CAP`)."""

    def __init__(self, *, base: float = BASE, cap: float = CAP) -> None:
        if not 0 < base <= cap:
            raise ValueError(f"need 0 < base <= cap, got base={base!r}, cap={cap!r}")
        self._backoff = EqualJitterBackoff(cap=cap, base=base)
        self.failures = 0

    def next_delay(self) -> float:
        """Seconds to wait before the next attempt; counts one more failure."""
        delay = self._backoff.compute(min(self.failures, _MAX_EXPONENT))
        self.failures += 1
        return delay

    def reset(self) -> None:
        """Redis answered: the next failure starts from ``base`` again."""
        self.failures = 0
