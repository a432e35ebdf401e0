"""Whether the master reaches Redis: its backoff while Redis is unreachable, and the
``redis_unavailable``/``redis_recovered`` signals that mark an outage's start and end.
"""

from __future__ import annotations

import datetime
import logging
import time

from .. import signals as rqueue_signals
from ..exceptions import RedisUnavailable
from ..worker.reconnect import Reconnect

logger = logging.getLogger("django_rqueue.supervisor")


class Reachability:
    """The master's outage state; times are ``time.monotonic()`` seconds. ``base``/``cap``
    (seconds): the backoff's first and longest pause
    (:class:`~django_rqueue.worker.reconnect.Reconnect`)."""

    def __init__(self, worker_id: str, *, base: float, cap: float) -> None:
        self.worker_id = worker_id
        #: Backoff while Redis is unreachable: no Redis call before :attr:`retry_at`.
        self.reconnect = Reconnect(base=base, cap=cap)
        #: When the master may call Redis again (``0.0``: at once).
        self.retry_at = 0.0
        #: When the outage began (``None``: Redis answers).
        self.down_since: float | None = None

    def due(self, now: float) -> bool:
        """Whether the master may call Redis at ``now``."""
        return now >= self.retry_at

    def failed(self, exc: RedisUnavailable, now: float) -> None:
        """A pass at ``now`` failed with ``exc``: back off; log and signal a new outage."""
        self.retry_at = time.monotonic() + self.reconnect.next_delay()
        if self.down_since is None:
            self.down_since = now
            logger.warning("worker %s: %s; retrying", self.worker_id, exc)
            self.unavailable(exc)
        else:
            logger.debug("worker %s: %s", self.worker_id, exc)

    def reached(self, now: float) -> None:
        """A pass at ``now`` succeeded: end the outage, if any (logged and signalled)."""
        if self.down_since is not None:
            logger.info(
                "worker %s: Redis reachable again after %.1f s",
                self.worker_id,
                now - self.down_since,
            )
            self.recovered(now - self.down_since)
        self.reconnect.reset()
        self.down_since = None

    def unavailable(self, exc: RedisUnavailable) -> None:
        """Send ``redis_unavailable`` (once per outage: the callers' first failure)."""
        rqueue_signals.send(
            rqueue_signals.redis_unavailable,
            self.worker_id,
            worker_id=self.worker_id,
            error=exc,
            since=datetime.datetime.now(datetime.UTC),
        )

    def recovered(self, downtime: float) -> None:
        """Send ``redis_recovered`` with the outage's length in seconds."""
        rqueue_signals.send(
            rqueue_signals.redis_recovered,
            self.worker_id,
            worker_id=self.worker_id,
            downtime=downtime,
        )
