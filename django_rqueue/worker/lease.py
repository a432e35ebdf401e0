"""Lease renewal from a thread of the worker's own process (the in-process mode).

Under ``rqueue_work`` the master renews its children's leases; a
:class:`~.loop.Worker` run in the calling process renews the running job's
lease with a :class:`LeaseKeeper` instead.
"""

from __future__ import annotations

import logging
import threading

from ..engine import commands, run
from ..engine.queue_ref import queue_ref
from ..exceptions import LeaseLost, RedisUnavailable
from .reconnect import BASE, Reconnect
from .reporting import REPORT_RETRY

logger = logging.getLogger("django_rqueue.worker")


class LeaseKeeper(threading.Thread):
    """Renews one running job's lease every ``lease / 3`` seconds until stopped."""

    def __init__(self, queue: str, job_id: str, token: int, lease: float) -> None:
        super().__init__(name=f"rqueue-lease-{job_id}", daemon=True)
        self.queue, self.job_id, self.token, self.lease = queue, job_id, token, lease
        self.done = threading.Event()
        self.lost = False

    def run(self) -> None:
        ref = queue_ref(self.queue)
        wait = self.lease / 3
        cap = min(REPORT_RETRY, self.lease / 3)
        reconnect = Reconnect(base=min(BASE, cap), cap=cap)
        while not self.done.wait(wait):
            try:
                renew = commands.renew(ref.keys, self.job_id, self.token, int(self.lease * 1000))
                run.execute(ref.client(), renew)
                wait = self.lease / 3
                reconnect.reset()
            except LeaseLost as exc:
                self.lost = True
                logger.error("%s; this run will be discarded", exc)
                return
            except RedisUnavailable as exc:
                logger.warning("could not renew lease of %s: %s", self.job_id, exc)
                # Try again soon, not a third of a lease later: a short outage
                # must not cost the job its lease.
                wait = reconnect.next_delay()
