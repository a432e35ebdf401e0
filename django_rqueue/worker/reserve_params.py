"""What every reserving call of one queue by one worker sends: the reserve, and the
ack-and-reserve, which is sent again as the same request when its reply was lost.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, TypedDict

from ..conf import RateLimit
from ..engine import calls, commands, run
from ..engine.calls import ScriptCall
from ..engine.queue_ref import QueueRef
from ..engine.replies import Reserved
from ..exceptions import LeaseLost, RedisUnavailable
from ..job import Job
from .reconnect import Reconnect

logger = logging.getLogger("django_rqueue.worker")

#: Seconds an ack-and-reserve whose reply was lost is sent again, as the same request, before
#: the caller falls back to a plain ack (a third of the default 30 s lease: the jobs it
#: reserved are still under their lease when it gets them).
RESEND_PATIENCE = 10.0
#: Longest pause in seconds between two sends of that request.
RESEND_DELAY = 0.5


class ReserveOptions(TypedDict):
    """The keywords every reserving call takes besides the keys (:func:`~.engine.calls.reserve`,
    :func:`~.engine.calls.ack_reserve`): lease (ms), worker, count, request id, the queue's
    ``group_concurrency`` and ``rate_limit``."""

    lease_ms: int
    worker_id: str
    count: int
    request_id: str
    group_concurrency: int | None
    rate_limit: RateLimit | None


@dataclass(frozen=True, slots=True)
class ReserveParams:
    """What every reserving call of one queue by one worker says besides its count, built
    once per call (:meth:`Reserver.params`) from the ``RQUEUE`` setting as it is then."""

    #: The queue: its keys, its lease (ms), ``group_concurrency`` and ``rate_limit``.
    ref: QueueRef
    #: The worker reserving (stored with each job it reserves).
    worker_id: str

    def reserve(self, count: int) -> ScriptCall:
        """``reserve.lua`` for up to ``count`` jobs, with a fresh request id (sent again, it
        returns the jobs its first send reserved)."""
        return calls.reserve(self.ref.keys, **self.options(count))

    def options(self, count: int) -> ReserveOptions:
        """The keywords of a reserving call for up to ``count`` jobs, with a fresh request id."""
        ref = self.ref
        return ReserveOptions(
            lease_ms=ref.lease_ms,
            worker_id=self.worker_id,
            count=count,
            request_id=calls.new_request_id(),
            group_concurrency=ref.config.group_concurrency,
            rate_limit=ref.config.rate_limit,
        )

    def ack_and_reserve(
        self, job: Job[Any], result: str, count: int
    ) -> tuple[LeaseLost | None, Reserved]:
        """Ack ``job`` (its sealed ``result``) and reserve up to ``count`` jobs in one round
        trip (``ack_reserve.lua``: :data:`~django_rqueue.engine.commands.ack_reserve`).

        While Redis is unreachable the same request (same request id) is sent again for
        :data:`RESEND_PATIENCE` seconds, with :class:`~.reconnect.Reconnect` delays of at
        most :data:`RESEND_DELAY` seconds.

        Raises:
            RedisUnavailable: its Redis could not be reached within that time.
        """
        ref = self.ref
        # One request id for every send: a resend after a lost reply acks nothing twice and
        # returns the jobs that reply carried, instead of leaving them reserved by no one
        # until their lease runs out (each one charged an attempt it never ran).
        command = commands.ack_reserve(
            ref.keys, job.id, job.token, result, job.result_ttl, **self.options(count)
        )
        try:
            return run.execute(ref.client(), command)
        except RedisUnavailable as exc:
            lost = exc  # the resend loop's state is made only when a reply was lost
        deadline = time.monotonic() + RESEND_PATIENCE
        reconnect = Reconnect(cap=RESEND_DELAY)
        while True:
            logger.warning(
                "worker %s: no reply to the ack of %s (%s); sending the same request again",
                self.worker_id,
                job.id,
                lost,
            )
            time.sleep(reconnect.next_delay())
            try:
                return run.execute(ref.client(), command)
            except RedisUnavailable as exc:
                if time.monotonic() > deadline:
                    raise
                lost = exc
