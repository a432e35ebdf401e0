"""When a worker may next ask a rate-limited queue for jobs.

A queue with a ``rate_limit`` hands out jobs no faster than that to all
workers together (the reserving scripts enforce it on the Redis clock, see
``engine/scripts/include/rate_allowance.lua``). A reserving call that the
limit left short while jobs are still queued replies with the milliseconds
until the queue's next slot (:attr:`~django_rqueue.engine.replies.Reserved.wait_ms`);
the worker notes them here and, until then, neither asks that queue again
nor blocks on its ``notify`` list (a wake-up token there would only wake it
for an empty reservation). It serves its other queues meanwhile and, when
they are idle, blocks on theirs no longer than until the earliest next slot
(:meth:`~.reserving.Reserver.idle_wait`). So a limited queue costs a worker about
one reserving call per slot it tries for, never a busy loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class NextSlots:
    """The ``time.monotonic()`` instant each rate-limited queue may next hand out a job.

    ``clock``: the time source (tests pass a fake one).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._at: dict[str, float] = {}

    def note(self, queue: str, wait_ms: int) -> None:
        """Record a reserving call's ``wait_ms`` for ``queue`` (0: not held back, forget it)."""
        if wait_ms > 0:
            self._at[queue] = self._clock() + wait_ms / 1000
        else:
            self._at.pop(queue, None)

    def limited(self, queue: str) -> bool:
        """Whether ``queue``'s next slot is still ahead (do not ask it, nor block on it)."""
        at = self._at.get(queue)
        if at is None:
            return False
        if self._clock() >= at:
            del self._at[queue]
            return False
        return True

    def seconds_to_next(self) -> float | None:
        """Seconds until the earliest next slot (>= 0), or ``None`` when no queue waits for one."""
        if not self._at:
            return None
        return max(0.0, min(self._at.values()) - self._clock())
