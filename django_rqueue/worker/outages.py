"""Which Redis servers a worker process skips for now, because they failed lately.

A worker or poller that serves queues on several servers (per-queue
``REDIS_URL``) keeps serving the healthy ones while another is down: a call
to a server that fails marks it down, and until its retry time (the
:class:`~.reconnect.Reconnect` backoff of that server alone: 0.1 s, doubling,
at most 5 s, jittered) its queues are neither reserved from nor blocked on,
so a dead server costs one failed call per backoff step instead of a
connect timeout on every pass. The first call after the retry time that
succeeds clears it. A server is a :class:`~django_rqueue.engine.connection.Location`:
a URL, a cache alias, a Sentinel service, or a whole Redis Cluster. A call that
failed with :class:`~django_rqueue.exceptions.SlotMoving` (its queue's cluster
slot is moving between masters) leaves out that queue alone: the cluster's
other queues live in other slots and are served meanwhile.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable

from ..exceptions import SlotMoving
from .reconnect import Reconnect


class Outages:
    """The servers that failed, each with the ``time.monotonic()`` instant to try it again.

    ``clock``: the time source (tests pass a fake one).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._down: dict[Hashable, tuple[Reconnect, float]] = {}

    def usable(self, server: Hashable, queue: str | None = None) -> bool:
        """Whether to call ``server`` now (for ``queue``'s keys, when given): neither it nor
        that queue of it is down, or their retry time came."""
        return self._usable(server) and (queue is None or self._usable((server, queue)))

    def _usable(self, key: Hashable) -> bool:
        down = self._down.get(key)
        return down is None or self._clock() >= down[1]

    def failed(
        self, server: Hashable, *, queue: str | None = None, error: BaseException | None = None
    ) -> float:
        """Note a failed call to ``server``; return the seconds until it is tried again.

        With ``queue`` and an ``error`` that is a :class:`SlotMoving`, only that queue
        of the server is left out.
        """
        key = (server, queue) if queue is not None and isinstance(error, SlotMoving) else server
        reconnect, _ = self._down.get(key) or (Reconnect(), 0.0)
        delay = reconnect.next_delay()
        self._down[key] = (reconnect, self._clock() + delay)
        return delay

    def recovered(self, server: Hashable, queue: str | None = None) -> bool:
        """Note a successful call to ``server`` (for ``queue``'s keys, when given); return
        whether it (or that queue of it) was down."""
        was_down = self._down.pop(server, None) is not None
        if queue is not None:
            was_down = self._down.pop((server, queue), None) is not None or was_down
        return was_down

    def down(self) -> list[Hashable]:
        """The servers noted down (their retry time may have come)."""
        return list(self._down)

    def seconds_to_retry(self) -> float | None:
        """Seconds until the earliest retry time (>= 0), or ``None`` when none is down."""
        if not self._down:
            return None
        return max(0.0, min(at for _, at in self._down.values()) - self._clock())
