"""The master's cancel watch: it finds the cancel requests of its children's running jobs and
has each carried out, softly through the cancel pipe, then by killing the child.

``cancel.lua`` only records the request in the job (field ``cx``). The master
of the worker running it looks for requests every :data:`POLL` seconds while
its children run jobs (one pipelined ``HGET`` per running job and Redis), and
for each one found:

1. **soft**: writes the job id to the child's *cancel pipe* and sends the child
   ``SIGUSR2`` (:func:`~django_rqueue.worker.cancelling.send_request`; the pipe's
   protocol, both ends, is :mod:`django_rqueue.worker.cancelling`). The child ends
   the job ``cancelled`` with ``cancel_running.lua``, not retried.
2. **hard**: if the job still runs ``RQUEUE["TIMEOUT_GRACE"]`` seconds later
   (it caught the exception, or sits in C code), the master kills the child's
   process group (:meth:`CancelWatch.stop_overdue`), ends the job ``cancelled``
   itself, hands the child's other jobs back unspent and forks a new child (as
   for a hard timeout).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import redis

from ..engine.connection import get_client, redis_errors
from ..engine.fields import JobFields
from ..engine.queue_ref import queue_ref
from ..exceptions import RedisUnavailable
from ..worker import cancelling
from .children import Child, ChildJob, ChildKind, KillReason
from .process import kill_group

logger = logging.getLogger("django_rqueue.supervisor")

#: Seconds between a master's looks for cancel requests while its children run jobs.
POLL = 1.0


class CancelWatch:
    """Looks for the cancel requests of the jobs the children run; ``grace`` (seconds): how
    long a job whose cancel was asked may still run before its child is killed."""

    def __init__(self, grace: float) -> None:
        self.grace = grace
        #: No look for cancel requests before this ``time.monotonic()``.
        self.next_check = 0.0

    def step(self, children: Iterable[Child], now: float) -> None:
        """Look for requests if :data:`POLL` seconds passed since the last look.

        Raises:
            RedisUnavailable: a Redis could not be read (the others were); the next
                step looks again.
        """
        if now >= self.next_check:
            self.look(children, now)
            self.next_check = now + POLL

    def look(self, children: Iterable[Child], now: float) -> None:
        """Ask the children to stop the running jobs whose cancel was asked: one pipelined
        ``HGET`` of each running job's request field per Redis. A record that cannot be
        read (corrupt: not a hash) is passed over; its lease renewal deals with it.

        Raises:
            RedisUnavailable: the first Redis that could not be read (after the others).
        """
        watched = [
            (child, running)
            for child in children
            if child.kind is ChildKind.WORKER and not child.killed_for
            for running in child.running.values()
            if running.job_id not in child.cancelling
        ]
        if not watched:
            return
        by_client: dict[int, tuple[redis.Redis, list[tuple[Child, ChildJob]]]] = {}
        for child, running in watched:
            client = get_client(running.queue)
            by_client.setdefault(id(client), (client, []))[1].append((child, running))
        failed: RedisUnavailable | None = None
        for client, entries in by_client.values():
            try:
                with redis_errors(client):
                    pipe = client.pipeline(transaction=False)
                    for _, running in entries:
                        key = queue_ref(running.queue).keys.job(running.job_id)
                        pipe.hget(key, JobFields.CANCEL_REQUESTED)
                    # A corrupt record answers WRONGTYPE: that job only, the others are read.
                    requested = pipe.execute(raise_on_error=False)
            except RedisUnavailable as exc:  # that server only: look at the others
                failed = exc
                continue
            for (child, running), asked in zip(entries, requested, strict=True):
                if isinstance(asked, redis.ResponseError):
                    # Its lease renewal finds the record corrupt and stops the job.
                    logger.debug("%s: cancel request unreadable: %s", running.job_id, asked)
                    continue
                if asked is None or not child.runs(running):
                    continue
                logger.info(
                    "%s %s: cancel requested; stopping it in child %d (killed after %g s)",
                    running.name,
                    running.job_id,
                    child.pid,
                    self.grace,
                )
                child.cancelling[running.job_id] = now + self.grace
                cancelling.send_request(child.cancel_fd, child.pid, running.job_id)
        if failed is not None:
            raise failed

    def stop_overdue(self, child: Child, now: float) -> bool:
        """Kill ``child`` if a job whose cancel it was asked still runs past its deadline;
        return whether it was killed."""
        overdue = [
            job_id
            for job_id, deadline in child.cancelling.items()
            if now >= deadline and job_id in child.running
        ]
        if not overdue:
            return False
        logger.warning(
            "%s still running %g s after its cancel; killing child %d",
            ", ".join(overdue),
            self.grace,
            child.pid,
        )
        child.killed_for = KillReason.CANCEL
        kill_group(child.pid)
        return True
