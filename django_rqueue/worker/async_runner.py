"""Async jobs in a worker: up to ``async_concurrency`` of them at once on one event loop.

A :class:`~.loop.Worker` that comes to an ``async def`` job hands it to its
:class:`AsyncRunner`, which runs a *session* on the worker's event loop (one
:class:`asyncio.Runner` per worker, in the main thread): it starts the job,
then fills the free slots with the async jobs that follow, the ones the
worker holds (reserved ahead) first, then new reservations (one
``reserve.lua`` call for as many jobs as there are free slots, each job with
its own lease and fencing token). A reservation whose reply came a third of a
lease or more after its request was sent (a slow network, a partition, a
paused process) is checked job by job with one lease renewal before its jobs
start, and a job whose lease was lost meanwhile is skipped, as on the
worker's other paths (:mod:`~.prefetch`). Every job is one task: it tells
the master it starts (the "start" line), awaits the coroutine under
``asyncio.timeout`` (the soft timeout: the coroutine is cancelled and the
attempt fails with :class:`~django_rqueue.exceptions.JobTimeout`), reports
the outcome through the same steps as a sync job
(:class:`~.attempt.AttemptSteps`: the report with the outcomes of the jobs that
ended about the same time, :mod:`~.async_reports`, then
:func:`~.reporting.aconclude`) and tells the master it ended. A job's slot is free
as soon as its coroutine ends: the next job is reserved and started while the
report is on its way, so a slot runs one coroutine at a time but its jobs do
not wait for each other's round trips.

When every queue is empty and slots are free, the session blocks on the
queues' ``notify`` lists with the worker's :class:`~.idle.IdleWaiter` in a
thread (``BLPOP`` on every server and cluster slot at once, as the sync loop
does, :meth:`~.reserving.Reserver.idle_wait`: a rate-limited queue before its next
slot counts as empty and the wait ends at that slot; cancelled, the wait is
ended with ``CLIENT UNBLOCK``), so a new job starts within milliseconds; a
finished job frees a slot without a reservation attempt unless the queues may
have more.

A session ends once no async job runs and it may not (or cannot) start
another: a sync job came up (it is held, its lease renewed by the master as
a prefetched job, and runs alone in the main thread after the session, with
its SIGALRM soft timeout), the queues are empty, the worker is stopping or
reached ``max_jobs``. The worker's own loop then goes on as for sync jobs. The
event loop is not running between sessions, so sync jobs and signal
receivers use the ORM as usual.

Django database connections: async jobs reach the ORM through
``sync_to_async`` (Django's async ORM methods do), which runs the query in
one shared thread; the runner calls ``close_old_connections()`` in that thread
when a session starts and ends, and once for the async jobs that ended together,
after their slots were filled again (as Django does after each request, but one
thread hop for a batch rather than one per job), so ``CONN_MAX_AGE`` is honoured and a
broken connection is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections

from .. import registry
from ..engine.connection import close_async_clients, location_of
from ..exceptions import JobCancelled, RedisUnavailable, UnknownJob
from ..execution import AttemptResult, arun_attempt, failure
from ..job import Job
from . import cancelling
from .async_reports import AsyncReports
from .attempt import AttemptSteps
from .hooks import WorkerHooks
from .idle import IdleWaiter
from .limits import Limits
from .prefetch import Prefetched, fresh
from .reconnect import Reconnect
from .reporting import aconclude
from .reserving import Reserver

logger = logging.getLogger("django_rqueue.worker")


def is_async_job(job: Job[Any]) -> bool:
    """Whether ``job`` is an intact record of a registered ``async def`` job.

    An unknown name or a corrupt record is not: the sync path fails it.
    """
    if job.problems:
        return False
    try:
        return registry.resolve(job).is_async
    except UnknownJob:
        return False


class AsyncRunner:
    """Runs a worker's async jobs, ``slots`` at once (see the module docstring).

    It shares with the worker's loop its :class:`~.reserving.Reserver` (the
    reservation policy), the jobs it holds (``prefetched``), its ``hooks`` (a
    supervised child's pipe, or ``None``), its :class:`~.limits.Limits`, its
    :class:`~.idle.IdleWaiter` and its cancel pipe (``cancel_fd``, or ``None``).
    ``renew_leases``: renew each running job's lease from a thread of this process.
    """

    def __init__(
        self,
        reserver: Reserver,
        prefetched: Prefetched,
        hooks: WorkerHooks | None,
        limits: Limits,
        idle: IdleWaiter,
        cancel_fd: int | None,
        *,
        slots: int,
        renew_leases: bool,
    ) -> None:
        self.reserver = reserver
        self.prefetched = prefetched
        self.hooks = hooks
        self.limits = limits
        self.idle = idle
        self.cancel_fd = cancel_fd
        self.slots = slots
        #: What its attempts share with the sync ones: lease, delay, the end (:mod:`~.attempt`).
        self.steps = AttemptSteps(hooks, renew_leases=renew_leases)
        #: Where its jobs' outcomes go, in batches (:mod:`~.async_reports`).
        self.reports = AsyncReports()
        self._runner: asyncio.Runner | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        #: A sync job came up (held in :attr:`prefetched`): start no more async jobs.
        self._holding = False
        #: Jobs whose outcome the current session reported.
        self._finished = 0
        #: The attempt (the task awaiting the job's coroutine) of each running job, by id.
        self._attempts: dict[str, asyncio.Future[AttemptResult]] = {}
        #: Running jobs whose attempt was cancelled at the master's request (:mod:`~.cancelling`).
        self._cancelled: set[str] = set()
        #: An async job ended since ``close_old_connections()`` last ran (:meth:`_housekeep`).
        self._housekeeping = False
        #: The jobs whose slot is taken: started, their attempt not ended yet. A slot is
        #: free again once the attempt ends, while its report is on its way.
        self._in_slot: set[str] = set()
        #: Set when a slot is freed, to wake :meth:`_serve` (made anew before each wait).
        self._freed: asyncio.Future[None] | None = None

    def run(self, queue: str, job: Job[Any]) -> int:
        """Run ``job`` and the async jobs that follow it until none runs; return how many ran."""
        if self._runner is None:
            self._runner = asyncio.Runner()
        self._holding, self._finished = False, 0
        self._runner.run(self._session(queue, job))
        return self._finished

    def close(self) -> None:
        """Close the event loop and its Redis clients (the worker exits)."""
        if self._runner is not None:
            self._runner.run(close_async_clients())
            self._runner.close()
            self._runner = None

    # -- the session -------------------------------------------------------

    def _on_cancel_requests(self) -> None:
        """The cancel pipe is readable: cancel the attempts of the jobs it names."""
        fd = self.cancel_fd
        if fd is None:
            return
        for job_id in cancelling.read_requests(fd):
            attempt = self._attempts.get(job_id)
            if attempt is not None and not attempt.done():
                self._cancelled.add(job_id)
                attempt.cancel()

    async def _session(self, queue: str, job: Job[Any]) -> None:
        self._housekeeping = True
        await self._housekeep()
        fd = self.cancel_fd
        if fd is not None:
            asyncio.get_running_loop().add_reader(fd, self._on_cancel_requests)
        try:
            await self._serve(queue, job)
        finally:
            if fd is not None:
                asyncio.get_running_loop().remove_reader(fd)
            await self._housekeep()

    async def _housekeep(self) -> None:
        """``close_old_connections()`` in the ORM's thread, once for the async jobs that
        ended since it last ran (module docstring)."""
        if self._housekeeping:
            self._housekeeping = False
            await sync_to_async(close_old_connections)()

    async def _serve(self, queue: str, job: Job[Any]) -> None:
        self._start(queue, job)
        wake: asyncio.Task[None] | None = None
        #: The last look found every queue empty: look again when woken, not on every end.
        dry = False
        retry_at = 0.0
        reconnect = Reconnect()
        try:
            while True:
                if self._may_start() and not dry and time.monotonic() >= retry_at:
                    try:
                        dry = not await self._fill()
                        reconnect.reset()
                    except RedisUnavailable as exc:
                        retry_at = time.monotonic() + reconnect.next_delay()
                        logger.error("worker %s: %s; retrying", self.reserver.worker_id, exc)
                await self._housekeep()  # after the refill: the new jobs wait for neither
                if not self._tasks:
                    return
                if self.hooks is not None:
                    self.hooks.flush()
                waits: set[asyncio.Future[Any]] = set(self._tasks)
                if dry and self._may_start():
                    wake = wake or asyncio.create_task(self._wait_for_work())
                    waits.add(wake)
                if not dry:  # a freed slot is filled at once, while the reports go out
                    self._freed = asyncio.get_running_loop().create_future()
                    waits.add(self._freed)
                pause = retry_at - time.monotonic()
                await asyncio.wait(
                    waits, timeout=pause if pause > 0 else None, return_when="FIRST_COMPLETED"
                )
                if wake is not None and wake.done():
                    if not wake.cancelled() and (error := wake.exception()) is not None:
                        logger.warning("worker %s: %s", self.reserver.worker_id, error)
                        # The outage may have broken the idle connections of the session's
                        # asyncio clients too (the wait does not use them): start afresh.
                        await close_async_clients()
                    dry, wake = False, None  # a job was queued, or the wait ended: look again
        finally:
            if wake is not None:
                wake.cancel()
                with contextlib.suppress(asyncio.CancelledError, RedisUnavailable):
                    await wake

    def _may_start(self) -> bool:
        """Whether a slot is free and the worker may start another job.

        ``max_jobs`` counts every job not yet reported as well: a job whose attempt ended
        has left its slot but may not have been reported yet.
        """
        limits = self.limits
        if self._holding or limits.stopping or len(self._in_slot) >= self.slots:
            return False
        return limits.max_jobs is None or limits.processed + self._finished + len(self._tasks) < (
            limits.max_jobs
        )

    def _free_slot(self, job_id: str) -> None:
        """The attempt of ``job_id`` ended (or never began): its slot is free."""
        if job_id in self._in_slot:
            self._in_slot.discard(job_id)
            freed = self._freed
            if freed is not None and not freed.done():
                freed.set_result(None)

    async def _fill(self) -> bool:
        """Start async jobs in the free slots; return whether the queues may hold more.

        The jobs the worker holds come first, in order; then new reservations,
        queue by queue in the worker's order (weighted queues: each free slot
        goes to the queue a draw picks, :meth:`~.weights.QueueOrder.quotas`).
        At the first sync job it stops: that job, and the rest of its
        reservation, are held for the worker's loop.
        """
        while self._may_start() and (held := self.prefetched.peek()) is not None:
            if not is_async_job(held):
                self._holding = True
                return True
            # One renewal (a round trip) only if it waited a third of a lease or more.
            waiting = self.prefetched.next()
            if waiting is not None:
                self._start(*waiting)
        # Weighted queues: one draw per free slot; a queue that has fewer jobs than
        # its quota hands the rest on to the next queue of the order.
        reserver, limits = self.reserver, self.limits
        quotas = reserver.order.quotas(self.slots - len(self._in_slot))
        spare, more = 0, False
        for queue in reserver.order.order():
            free = self.slots - len(self._in_slot)
            if not self._may_start():
                return True
            if limits.max_jobs is not None:
                left = limits.max_jobs - limits.processed - self._finished
                free = min(free, left - len(self._tasks))
            want = free if quotas is None else min(free, quotas[queue] + spare)
            if want < 1:
                continue
            server = location_of(queue)
            # As if empty: until its next slot (a rate limit), or its Redis's retry time.
            if not reserver.usable(queue):
                spare = want
                continue
            try:
                # Dated by when the request was (first) sent (see prefetch.py).
                reserved, reserved_at = await reserver.areserve(queue, want)
            except RedisUnavailable as exc:
                reserver.server_failed(queue, server, exc)
                if reserver.all_down():
                    raise  # every server is down: the session backs off
                spare = want
                continue
            reserver.recovered(queue, server)
            jobs = [Job.from_fields(*r) for r in reserved]
            # A reserve sent again after its reply was lost (Reserver.areserve) may
            # bring more jobs than the slots free now: the rest are held, run next.
            self.prefetched.add(queue, jobs[want:], since=reserved_at)
            jobs = jobs[:want]
            spare, more = want - len(jobs), more or len(jobs) == want
            if not fresh(reserved_at):  # a late reply: are they still ours? (see prefetch.py)
                jobs = await asyncio.to_thread(self.prefetched.may_start, queue, jobs, reserved_at)
            for index, job in enumerate(jobs):
                if not is_async_job(job):
                    self.prefetched.add(queue, jobs[index:], since=reserved_at)
                    self._holding = True
                    return True
                self._start(queue, job)
            if len(jobs) == free:
                return True
        return more

    async def _wait_for_work(self) -> None:
        """Block until a queue gets a wake-up token or the worker's
        :meth:`~.reserving.Reserver.idle_wait` passes: the worker's
        :class:`~.idle.IdleWaiter` in a thread (every server and slot at once),
        ended at once (``CLIENT UNBLOCK``) when this task is cancelled."""
        wait = self.reserver.idle_wait()
        if not wait.notify:  # every queue here waits for its next slot
            await asyncio.sleep(wait.seconds)
            return
        cancel = threading.Event()
        try:
            await asyncio.to_thread(self.idle.wait, wait.lists(), wait.seconds, cancel=cancel)
        except asyncio.CancelledError:
            self.idle.interrupt(cancel)
            raise

    # -- one job -----------------------------------------------------------

    def _start(self, queue: str, job: Job[Any]) -> None:
        if self.hooks is not None:
            self.hooks.started(queue, job)  # before its code runs
        self._in_slot.add(job.id)
        task = asyncio.create_task(self._run_job(queue, job), name=f"rqueue {job.id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run_job(self, queue: str, job: Job[Any]) -> None:
        """Run one reserved async job and report its outcome, fenced by its token."""
        try:
            await self._attempt(queue, job)
        except Exception:  # a bug here must not end the session; the lease expires
            logger.exception("worker %s: running %s failed", self.reserver.worker_id, job.id)
        finally:
            self._free_slot(job.id)

    async def _attempt(self, queue: str, job: Job[Any]) -> None:
        started = time.monotonic()
        job_function = registry.resolve(job)
        steps = self.steps
        with steps.leased(queue, job):
            attempt = asyncio.ensure_future(
                arun_attempt(job_function, job, timeout=job.timeout or None)
            )
            self._attempts[job.id] = attempt
            try:
                try:
                    result = await attempt
                except asyncio.CancelledError:
                    if job.id not in self._cancelled:
                        raise
                    result = failure(JobCancelled(f"job {job.id} was cancelled while it ran"))
            finally:
                self._attempts.pop(job.id, None)
                self._cancelled.discard(job.id)
                self._housekeeping = True
                self._free_slot(job.id)
        ran = time.monotonic() - started
        result, delay = steps.settle(job_function, job, result)
        if isinstance(result.exception, JobCancelled):  # rare: reported on its own
            reported = await asyncio.to_thread(steps.deliver, queue, job, result, delay)
        else:
            reported = await self.reports.report(queue, job, result, delay)
        self._finished += 1
        steps.finished(job, reported)
        await aconclude(job_function, job, queue, result, reported, delay, duration=ran)
