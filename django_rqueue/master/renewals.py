"""Lease renewal for the master's children: it renews the leases of the jobs they run and hold
ahead, and kills a child whose running job's lease was lost.

Every running or prefetched job's lease is renewed a third of ``RQUEUE["LEASE"]``
after the last renewal, fenced by its token, server by server: a server that
fails is left out until its retry time (:mod:`~django_rqueue.worker.outages`)
while the others' renewals go on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from ..conf import get_config
from ..engine import commands, run
from ..engine.connection import location_of
from ..engine.queue_ref import queue_ref
from ..exceptions import LeaseLost, RedisUnavailable
from ..job import Job
from ..worker.outages import Outages
from ..worker.reporting import read_record
from .children import Child, ChildJob, KillReason
from .process import kill_group

logger = logging.getLogger("django_rqueue.supervisor")


class Renewals:
    """Renews the children's leases; ``read(child)`` reads what a child's pipe has (the
    master's ``Supervisor._read``, which counts the ends it hears)."""

    def __init__(self, read: Callable[[Child], None]) -> None:
        self.read = read
        #: Servers whose lease renewals failed lately (skipped until their retry time).
        self.outages = Outages()

    def renew_due(self, children: Iterable[Child], now: float) -> None:
        """Renew every lease due at ``now`` (``time.monotonic()``), server by server: a
        server that fails is left out until its retry time (:mod:`~django_rqueue.worker.outages`;
        a queue whose cluster slot is moving, alone) and the others' renewals go on.

        Raises:
            RedisUnavailable: the first failure, at the end.
        """
        lease = get_config().lease
        failed: RedisUnavailable | None = None
        for child in children:
            if child.killed_for:
                continue
            for running in [*child.running.values(), *child.prefetched.values()]:
                if now < running.renew_at:
                    continue
                if not child.holds(running):
                    continue  # ended or started meanwhile (a refusal above read the pipe)
                server = location_of(running.queue)
                if not self.outages.usable(server, running.queue):
                    continue
                try:
                    self._renew(child, running, now, lease)
                except RedisUnavailable as exc:
                    self.outages.failed(server, queue=running.queue, error=exc)
                    failed = failed or exc
                else:
                    self.outages.recovered(server, running.queue)
        if failed is not None:
            raise failed

    def _renew(self, child: Child, running: ChildJob, now: float, lease: float) -> None:
        running.renew_at = now + lease / 3
        ref = queue_ref(running.queue)
        try:
            renew = commands.renew(ref.keys, running.job_id, running.token, ref.lease_ms)
            run.execute(ref.client(), renew)
        except LeaseLost as exc:
            if child.runs(running):
                self._lease_lost(child, running, exc)
            else:  # held ahead: the child confirms the lease before starting it after a long hold
                child.prefetched.pop(running.job_id, None)
                logger.warning("%s (reserved ahead by child %d)", exc, child.pid)
        except RedisUnavailable:
            # Retry at the next attempt to reach Redis, not a third of a lease
            # later: a short outage must not cost a running job its lease.
            running.renew_at = now
            raise

    def _lease_lost(self, child: Child, running: ChildJob, exc: LeaseLost) -> None:
        """A renewal was refused: kill the child if the job now belongs to someone else.

        The child's pipe is read first: the job may have ended already (its
        "end", maybe for a run discarded for this very reason, is waiting
        in the pipe) and the child be running its next job, which a kill
        would cost an attempt ("worker process died"). So the child is killed
        only if it still runs this job under this token.

        Refused because the job just finished under our token (the child's
        "end" message is on its way): nothing to do. Refused because the
        token moved on (this worker was frozen or cut off past its lease and
        the job was reclaimed, maybe re-run elsewhere): the run's outcome would
        be rejected anyway, so stop it now rather than let it run alongside
        the new holder.
        """
        self.read(child)
        current = child.running.get(running.job_id)
        if current is None or current.token != running.token:
            logger.debug("%s (the child has finished that job)", exc)
            return
        ref = queue_ref(running.queue)
        fields = read_record(ref.client(), ref.keys, running.job_id)
        # None: the record is corrupt (not a hash), the job no longer ours: stop the run.
        if fields is not None and (
            not fields or Job.from_fields(running.job_id, fields).token == running.token
        ):
            logger.debug("%s", exc)  # it finished (record kept or deleted)
            return
        logger.warning(
            "%s %s: lease lost (%s); killing child %d, its run is discarded",
            running.name,
            running.job_id,
            exc,
            child.pid,
        )
        child.killed_for = KillReason.LEASE
        child.culprits[running.job_id] = time.monotonic() - running.started
        kill_group(child.pid)
