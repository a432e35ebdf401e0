"""Reporting the outcomes of a worker's async jobs in batches, off the event loop.

Every async job that ends hands its outcome to :meth:`AsyncReports.report` and
awaits the verdict. The first one starts a *delivery*: a task that takes every
outcome waiting and reports the lot in one thread hop
(:func:`~.reporting.deliver_batch`: the acks written together and their replies
read together, one round trip per connection), then takes the outcomes that
ended meanwhile, until none waits. With 100 jobs in flight, those that end
while a batch is on its way make the next batch, so a busy event loop pays one
hop and one round trip for many jobs; an idle one reports a lone job as soon as
it ends. The sync client does the talking, in a thread, rather than the asyncio
one on the event loop, because redis-py's asyncio client costs the event loop
several times the CPU per call, and the loop is what runs the jobs.

The fencing, the retries while Redis is unreachable and the resend of an ack
whose reply was lost are :mod:`~.reporting`'s, the same as for a sync job.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..execution import AttemptResult
from ..job import Job
from .hooks import AttemptOutcome
from .reporting import deliver_batch

#: One outcome waiting: ``(queue, job, attempt, delay)`` and the future of its verdict.
Waiting = tuple[str, Job[Any], AttemptResult, float | None, asyncio.Future[AttemptOutcome]]


class AsyncReports:
    """The outcomes of one event loop's async jobs, reported in batches (module docstring)."""

    def __init__(self) -> None:
        self._waiting: list[Waiting] = []
        self._delivery: asyncio.Task[None] | None = None

    async def report(
        self, queue: str, job: Job[Any], attempt: AttemptResult, delay: float | None
    ) -> AttemptOutcome:
        """Report ``attempt`` of ``job`` (``delay``: seconds before its retry, ``None``:
        none) with the others that ended about now; return its verdict."""
        verdict: asyncio.Future[AttemptOutcome] = asyncio.get_running_loop().create_future()
        self._waiting.append((queue, job, attempt, delay, verdict))
        if self._delivery is None or self._delivery.done():
            self._delivery = asyncio.create_task(self._deliver(), name="rqueue reports")
        return await verdict

    async def _deliver(self) -> None:
        while self._waiting:
            batch, self._waiting = self._waiting, []
            try:
                outcomes = await asyncio.to_thread(deliver_batch, [w[:4] for w in batch])
            except asyncio.CancelledError:  # the event loop is closing
                for *_, verdict in batch:
                    verdict.cancel()
                raise
            except Exception as exc:  # a bug: each job's task sees it (and logs it)
                for *_, verdict in batch:
                    if not verdict.done():
                        verdict.set_exception(exc)
                continue
            for (*_, verdict), outcome in zip(batch, outcomes, strict=True):
                if not verdict.done():
                    verdict.set_result(outcome)
