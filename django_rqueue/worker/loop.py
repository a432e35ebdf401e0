"""The worker loop: reserve, run, report, in one process.

Queues are served in strict order: a job of the first queue always goes
before any job of the second; or, with weights (``--queues high:5,low:1``),
in the weighted random order of :mod:`~.weights`, drawn once per job, so
that reservations ahead (batches, ``ack_reserve.lua``) take more jobs of a
queue only when the draws for those jobs chose it too. When every queue is
empty (or paused) the worker blocks on the queues' ``notify`` lists
(``BLPOP``, :data:`IDLE_BLOCK` seconds at a time; on every server and
cluster slot at once, :mod:`~.idle`) instead of sleeping, so a new job
starts within milliseconds and an idle worker costs Redis about one command
per second. A worker of one queue (on one server, not a cluster) sends its
next reserve in the same write as that ``BLPOP``, so Redis reserves the job
the moment its token comes (one round trip, not two:
:meth:`Worker._wait_for_work`). A server that fails is left out, its queues
neither reserved from nor blocked on, until its retry time (:mod:`~.outages`),
while the queues of the others are served. A queue whose ``rate_limit`` held
jobs back is treated as empty until its next slot (:mod:`~.rate_limits`): not
asked, not blocked on, and the idle wait ends at that slot. While a job runs,
a thread renews its lease every third of ``RQUEUE["LEASE"]``; at the job's
``timeout`` the job gets :class:`~.exceptions.JobTimeout` (SIGALRM, main
thread only).

After a successful job of the first queue (weighted: of the queue the next
draw picks again) the worker acks it and reserves the next job in one round
trip (``ack_reserve.lua``, as BullMQ's ``moveToFinished`` fetches the next
job), unless it is stopping or about to recycle. Under a supervisor the
master is told about that next job at once, so it renews its lease while the
previous job's ``job_succeeded`` receivers run (and counts that time against
its hard timeout if they hang); an unsupervised worker prefetches only when
``job_succeeded`` has no receivers. A job reserved that way and not started
because a stop came in between is handed back without spending an attempt.

Every reserved job (the first of a reservation too) is confirmed with one
lease renewal before it starts if its reserving request went out a third of
a lease or more before (a slow reply, the worker paused between request and
run, a long hold behind other jobs), and skipped if its lease is gone: it was
re-queued and may run elsewhere. A quick reply costs no extra round trip.

Batches: while the jobs of the first queue (weighted: of the queue picked)
are short and nobody listens to ``job_succeeded`` for them, the worker
reserves up to :data:`MAX_BATCH` jobs per round trip (as many as fit in
:data:`BATCH_BUDGET` seconds of work at the average run time seen so far;
one while that is unknown), each with its own lease and fencing token, and
sends each job's ack the moment it returns without waiting for the reply
(:class:`~django_rqueue.engine.pipelining.AckStream`); the replies are read
with the next batch's round trip. A job's success is recorded as promptly as
with one ack per round trip; the price is that a job reserved in a batch
waits for the ones before it (at most about :data:`BATCH_BUDGET` seconds
when they run as long as the ones before). Celery's and Dramatiq's workers
prefetch for the same reason (``worker_prefetch_multiplier``, ``prefetch``).

``async def`` jobs run on an event loop, up to ``async_concurrency`` at once,
each with its own reservation, lease and token (:mod:`~.async_runner`); sync
jobs still run one at a time, never beside async ones.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any, NamedTuple

import redis
from django.db import close_old_connections

from .. import registry, signals
from ..conf import get_config
from ..encryption import seal
from ..engine import calls, transitions
from ..engine.calls import ScriptCall
from ..engine.connection import Location, get_client, location_of, redis_errors
from ..engine.pipelining import AckStream, PendingAck
from ..engine.queue_ref import queue_ref
from ..exceptions import JobCancelled, JobTimeout, LeaseLost, RedisUnavailable, UnknownJob
from ..execution import Outcome, failure, next_delay, run_attempt, soft_timeout
from ..job import Job
from ..types import JobSpec
from . import cancelling
from .async_runner import AsyncRunner, is_async_job
from .hooks import AttemptOutcome, StopRequested, WorkerHooks
from .idle import IdleWaiter
from .lease import LeaseKeeper
from .outages import Outages
from .poller import Poller
from .prefetch import Prefetched
from .process import new_worker_id, rss_mb
from .rate_limits import NextSlots
from .reconnect import Reconnect
from .reporting import (
    conclude,
    deliver_ack,
    deliver_cancel,
    deliver_failure,
)
from .settings import WorkerSettings
from .weights import QueueOrder

logger = logging.getLogger("django_rqueue.worker")

#: Seconds an idle worker blocks on Redis per call: an idle worker costs Redis
#: about 2 commands per IDLE_BLOCK (BLPOP + a reserve). It is also the longest
#: an idle in-process worker takes to notice SIGTERM (a supervised child is
#: interrupted at once).
IDLE_BLOCK = 4.0
#: Shortest idle ``BLPOP`` in seconds: Redis reads a timeout under 1 ms as 0, "for ever".
MIN_BLOCK = 0.001
#: Seconds of work (at the average run time seen) a batch reservation may hold.
BATCH_BUDGET = 0.05
#: Most jobs reserved in one round trip: jobs of 1 ms or more reach BATCH_BUDGET first.
#: 50 rather than 20: the bench's no-op drain with two processes on two cores went from
#: 7 891 to 9 747 jobs/s, one run each in one minute.
MAX_BATCH = 50
#: Seconds a worker leaves a queue alone after Redis refused to reserve from it (an error
#: reply such as WRONGTYPE: a structure of that queue is corrupt), serving its other queues.
REFUSED_PAUSE = 5.0
#: The error replies that are not about the queue's data: a Redis Cluster moving slots.
_TRANSIENT = (
    redis.exceptions.TryAgainError,
    redis.exceptions.MovedError,
    redis.exceptions.AskError,
    redis.exceptions.ClusterDownError,
)


class IdleWait(NamedTuple):
    """What an idle worker blocks on (:meth:`Worker.idle_wait`)."""

    #: The ``notify`` lists to ``BLPOP``, in the worker's queue order (none: just sleep).
    notify: list[str]
    #: How long, in seconds.
    seconds: float
    #: The queue of each list in :attr:`notify` (where it is: its server or slot).
    queues: list[str]

    def lists(self) -> list[tuple[str, str]]:
        """``(queue, notify list)`` pairs, as :meth:`~.idle.IdleWaiter.wait` takes them."""
        return list(zip(self.queues, self.notify, strict=True))


@dataclass
class Pickup:
    """A reserve sent behind the idle ``BLPOP`` (:meth:`Worker._wait_for_work`), taken by
    the next :meth:`Worker.work_once`."""

    queue: str
    #: The reserve call (:func:`~..engine.calls.reserve`): sent again, its request id makes it
    #: return the jobs it reserved.
    call: ScriptCall
    #: When it was first sent (``time.monotonic()``, taken before the write): the jobs it
    #: reserves are dated by this, whenever and however often their reply is read.
    sent_at: float = 0.0
    #: Its reply, once read; ``None``: unread (lost, or never sent): send it again.
    reply: Any = None


class Worker:
    """Serve ``queues`` (declared queue names, in priority order), or, with ``weights``
    (queue -> integer >= 1, every queue), in a weighted random order per job (:mod:`~.weights`).

    ``rqueue_work`` runs one in each supervised child. It can also run in the
    calling process (the in-process mode, for tests and scripts, like RQ's
    ``SimpleWorker``): ``Worker(["default"], burst=True).run()`` runs the
    queued jobs here, one at a time, renewing each running job's lease from a
    thread (:class:`~.lease.LeaseKeeper`) and promoting due scheduled jobs and
    retries from a poller thread. There is no hard timeout in this mode (the
    soft ``timeout`` still raises :class:`~django_rqueue.exceptions.JobTimeout`
    in the job when it runs in the main thread); :meth:`request_stop` stops it
    after the current job.

    ``burst``: exit once no job is queued or running on the queues (scheduled
    jobs, retries included, are not waited for). ``max_jobs``: exit after that
    many jobs; ``max_memory_mb``: exit after the job that left this process
    above that RSS (MiB). ``with_poller``: run a :class:`~.poller.Poller`
    thread for the same queues. ``renew_leases``: renew the running job's
    lease from a thread of this process. ``hooks``: told when a job starts and
    when its outcome is reported; a supervisor's children get
    ``with_poller=False, renew_leases=False`` and hooks, as the master
    renews their leases and runs the poller in a child of its own.
    ``async_concurrency``: how many ``async def`` jobs run at once on the
    worker's event loop (default ``RQUEUE["ASYNC_CONCURRENCY"]``).

    Raises:
        ValueError: a queue is not declared; ``weights`` do not match ``queues``.
    """

    def __init__(
        self,
        queues: Sequence[str],
        *,
        weights: Mapping[str, int] | None = None,
        burst: bool = False,
        max_jobs: int | None = None,
        with_poller: bool = True,
        worker_id: str | None = None,
        max_memory_mb: float | None = None,
        renew_leases: bool = True,
        hooks: WorkerHooks | None = None,
        async_concurrency: int | None = None,
        cancel_fd: int | None = None,
    ) -> None:
        #: What it serves and for how long, checked (:mod:`~.settings`).
        self.settings = settings = WorkerSettings(
            tuple(queues),
            weights=weights,
            burst=burst,
            max_jobs=max_jobs,
            max_memory_mb=max_memory_mb,
            async_concurrency=async_concurrency,
        ).checked()
        self.queues = list(settings.queues)
        self.async_concurrency = settings.async_slots
        self.burst = settings.burst
        self.max_jobs = settings.max_jobs
        self.with_poller = with_poller
        self.worker_id = worker_id or new_worker_id()
        self.max_memory_mb = settings.max_memory_mb
        self.renew_leases = renew_leases
        self.hooks = hooks
        #: A supervised child's cancel pipe from its master (:mod:`~.cancelling`), or ``None``.
        self.cancel_fd = cancel_fd
        #: The sync job this process runs, for the cancel signal to match (``None``: none).
        self._cancel_target: str | None = None
        #: Whether the job's own code runs now (a cancel then raises in it).
        self._in_job = False
        #: A cancel of :attr:`_cancel_target` arrived before its code started.
        self._cancel_asked = False
        self.stopping = False
        #: True while reserving or running a job: a child's stop handler
        #: interrupts only an idle worker.
        self.busy = False
        self.processed = 0
        #: Jobs reserved ahead (with the last ack, or in a batch), run next.
        self._prefetched = Prefetched(self.worker_id, hooks)
        #: The order the queues are tried in, fetch after fetch (:mod:`~.weights`).
        self.order = QueueOrder(self.queues, settings.weights)
        #: When each rate-limited queue that held jobs back has its next slot.
        self.next_slots = NextSlots()
        #: The Redis servers that failed lately: their queues are skipped until their retry.
        self.outages = Outages()
        #: Blocks on every queue's ``notify`` list at once, server by server, slot by slot.
        self.idle = IdleWaiter(self.outages)
        #: Acks of the current batch sent without waiting (one connection, one queue's).
        self._acks: AckStream | None = None
        #: Average seconds a job ran (EWMA), per queue that may lead a fetch; absent
        #: until one ran.
        self._run_times: dict[str, float] = {}
        #: Whether the last job of a queue that may lead a fetch had no
        #: job_succeeded receivers.
        self._quiet: dict[str, bool] = {}
        #: Runs the async jobs; made when the first one comes up.
        self._async: AsyncRunner | None = None
        #: The reserve sent behind the last idle ``BLPOP``, until a :meth:`work_once` takes it.
        self._pickup: Pickup | None = None

    @classmethod
    def supervised(
        cls, settings: WorkerSettings, *, worker_id: str, hooks: WorkerHooks, cancel_fd: int | None
    ) -> Worker:
        """The worker of a child of ``rqueue_work``'s master, which runs the poller and
        renews the leases itself (so this worker does neither) and hears of each job
        through ``hooks``.

        Raises:
            ValueError: as :meth:`WorkerSettings.checked <.settings.WorkerSettings.checked>`.
        """
        return cls(
            settings.queues,
            weights=settings.weights,
            burst=settings.burst,
            max_jobs=settings.max_jobs,
            max_memory_mb=settings.max_memory_mb,
            async_concurrency=settings.async_concurrency,
            with_poller=False,
            worker_id=worker_id,
            renew_leases=False,
            hooks=hooks,
            cancel_fd=cancel_fd,
        )

    # -- lifecycle -------------------------------------------------------

    def request_stop(self, signum: int = 0, frame: FrameType | None = None) -> None:
        """Finish the current job (if any), then exit."""
        if not self.stopping:
            logger.info("worker %s: stopping after the current job", self.worker_id)
        self.stopping = True

    def install_child_signal_handlers(self) -> None:
        """As a supervised child: ignore SIGTERM/SIGINT (the master decides); SIGUSR1 stops."""
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)

        def stop(signum: int, frame: FrameType | None) -> None:
            self.request_stop()
            if not self.busy:
                raise StopRequested

        signal.signal(signal.SIGUSR1, stop)
        if self.cancel_fd is not None:
            signal.signal(cancelling.SIGNAL, self._on_cancel_signal)

    def _on_cancel_signal(self, signum: int, frame: FrameType | None) -> None:
        """SIGUSR2 from the master: stop the sync job it names in the cancel pipe.

        Raises :class:`JobCancelled` in the job's code when it runs now; before it
        starts, marks it so that it does not start. With no sync job running
        (an async session reads the pipe itself), leaves the pipe alone.
        """
        target, fd = self._cancel_target, self.cancel_fd
        if target is None or fd is None:
            return
        if target not in cancelling.read_requests(fd):
            return  # a late request for a job that already ended
        if self._in_job:
            self._in_job = False
            raise JobCancelled(f"job {target} was cancelled while it ran")
        self._cancel_asked = True

    def run(self) -> int:
        """Work until stopped; return the exit status (0)."""
        registry.autodiscover()
        poller = Poller(self.queues) if self.with_poller else None
        thread = None
        if poller is not None:
            thread = threading.Thread(target=poller.run, name="rqueue-poller", daemon=True)
            thread.start()
        logger.info("worker %s: serving %s", self.worker_id, ", ".join(self.queues))
        reconnect = Reconnect()
        try:
            while not self.stopping:
                try:
                    if self.work_once():
                        reconnect.reset()
                        if self._recycle_due():
                            break
                        continue
                    if self.hooks is not None:
                        self.hooks.flush()
                    if self.burst and self._drained():
                        break
                    # A stop asked while reserving did not interrupt (busy): obey it first.
                    if not self.stopping:
                        self._wait_for_work()
                    reconnect.reset()
                except RedisUnavailable as exc:
                    delay = reconnect.next_delay()
                    logger.error("worker %s: %s; retrying in %.1f s", self.worker_id, exc, delay)
                    self._pause(delay)
        except StopRequested:
            pass
        finally:
            self.busy = True  # a second stop signal must not cut the hand-back short
            if self._async is not None:
                self._async.close()
            self.idle.close()
            self._collect_acks()
            self._settle_pickup()
            self._prefetched.hand_back_all()
            if self.hooks is not None:
                self.hooks.flush()
            if poller is not None and thread is not None:
                poller.halt(thread)
        logger.info("worker %s: exiting after %d job(s)", self.worker_id, self.processed)
        return 0

    def _limit_reached(self, processed: int) -> str | None:
        """Why this worker must exit once it has run ``processed`` jobs, or ``None``."""
        if self.max_jobs is not None and processed >= self.max_jobs:
            return f"ran {processed} job(s), exiting (--max-jobs)"
        if self.max_memory_mb is not None and (rss := rss_mb()) > self.max_memory_mb:
            return f"RSS {rss:.0f} MiB > {self.max_memory_mb:.0f} MiB, exiting (--max-memory)"
        return None

    def _recycle_due(self) -> bool:
        reason = self._limit_reached(self.processed)
        if reason is not None:
            logger.info("worker %s: %s", self.worker_id, reason)
        return reason is not None

    def _batch_size(self, queue: str) -> int:
        """How many jobs of ``queue`` (one that may lead a fetch) to reserve in one round trip."""
        run_time = self._run_times.get(queue)
        # Only under a supervisor: its master renews the leases of jobs held ahead.
        if not self._quiet.get(queue) or run_time is None or self.hooks is None:
            return 1
        size = min(MAX_BATCH, max(1, int(BATCH_BUDGET / max(run_time, 1e-6))))
        if self.max_jobs is not None:
            size = min(size, max(1, self.max_jobs - self.processed - 1))
        return size

    def _collect_acks(self) -> None:
        """Read the replies of the acks sent without waiting; resend the unknown ones."""
        if self._acks is None or not self._acks.owed:
            return
        for ack, verdict in self._acks.collect():
            if isinstance(verdict, LeaseLost):
                logger.error("%s; its run was discarded", verdict)
            elif verdict is None:  # resent synchronously (idempotent under the token)
                logger.warning(
                    "worker %s: no reply to the ack of %s; sending it again",
                    self.worker_id,
                    ack.job_id,
                )
                deliver_ack(ack)

    def _pause(self, seconds: float) -> None:
        """Sleep ``seconds`` in short steps, returning early once a stop is requested."""
        deadline = time.monotonic() + seconds
        while not self.stopping and time.monotonic() < deadline:
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))

    # -- one job ---------------------------------------------------------

    def work_once(self) -> bool:
        """Reserve and run at most one job; return whether there was one.

        A reserved job whose lease may have run out before it could start
        (see :mod:`~.prefetch`) is skipped, not run: that also counts as
        having had one (the caller goes on at once).
        """
        self.busy = True
        try:
            waiting = self._prefetched.next()
            if waiting is not None:
                self._run(*waiting)
                return True
            if self._pickup is not None:
                pickup = self._pickup
                try:
                    queue, reserved, reserved_at = self._take_pickup(pickup)
                except redis.ResponseError as exc:
                    if isinstance(exc, _TRANSIENT):
                        raise
                    self._pickup = None  # refused: the script reserved nothing
                    self._refused(pickup.queue, exc)
                    return False
                return self._start(queue, reserved, reserved_at)
            failed: RedisUnavailable | None = None
            for n, queue in enumerate(self.order.order()):
                if self.next_slots.limited(queue):  # as if empty until its next slot
                    continue
                server = location_of(queue)
                if not self.outages.usable(server, queue):  # down: wait for its retry time
                    continue
                ref = queue_ref(queue)
                count = 1
                if n == 0 and self.order.leads(queue):
                    count = self.order.run(queue, self._batch_size(queue))
                # Before the request: the leases may start any time after this.
                reserved_at = time.monotonic()
                try:
                    reserved = transitions.reserve_many(
                        ref.client(),
                        ref.keys,
                        lease_ms=ref.lease_ms,
                        worker_id=self.worker_id,
                        count=count,
                        group_concurrency=ref.config.group_concurrency,
                        rate_limit=ref.config.rate_limit,
                    )
                except RedisUnavailable as exc:
                    failed = exc
                    self.server_failed(queue, server, exc)
                    continue
                except redis.ResponseError as exc:
                    if isinstance(exc, _TRANSIENT):
                        raise
                    self._refused(queue, exc)
                    continue
                if self.outages.recovered(server, queue):
                    logger.info("worker %s: queue %s: Redis reachable again", self.worker_id, queue)
                if self._start(queue, reserved, reserved_at):
                    return True
            if failed is not None and all(
                not self.outages.usable(location_of(q), q) for q in self.queues
            ):
                raise failed  # every server is down: the caller backs off
            return False
        finally:
            self.busy = False

    def _refused(self, queue: str, exc: redis.ResponseError) -> None:
        """Redis refused to reserve from ``queue`` (an error reply such as ``WRONGTYPE``:
        a structure of that queue is corrupt, which the scripts report before changing
        anything): log it and leave the queue alone for :data:`REFUSED_PAUSE` seconds, as
        a rate-limited one, so the worker serves its other queues and does not die."""
        logger.error(
            "worker %s: queue %s: Redis refused to hand out jobs (%s); trying again in %.0f s",
            self.worker_id,
            queue,
            exc,
            REFUSED_PAUSE,
        )
        self.next_slots.note(queue, int(REFUSED_PAUSE * 1000))

    def _take_pickup(self, pickup: Pickup) -> tuple[str, transitions.Reserved, float]:
        """The reservation of the reserve sent behind the idle ``BLPOP``: its reply, or, unread,
        the reply of the same request sent again (same request id: the same jobs if the
        first one ran); ``(queue, reservation, time requested)``.

        The time requested is always when the reserve was first sent
        (:attr:`Pickup.sent_at`): Redis may have run it any time after that, and a
        reply held by a paused process or a partition, or one given again to the
        request sent again, says nothing about how long its leases have run.

        Raises:
            RedisUnavailable: it could not be sent again; it stays to be taken later.
        """
        queue = pickup.queue
        if pickup.reply is not None:
            try:
                reserved = transitions.reserved_from(pickup.reply)
            except redis.ResponseError:  # NOSCRIPT (a restarted Redis): sent again below
                pickup.reply = None
            else:
                self._pickup = None
                return queue, reserved, pickup.sent_at
        try:
            reserved = transitions.reserve_call(get_client(queue), pickup.call)
        except RedisUnavailable as exc:
            self.server_failed(queue, location_of(queue), exc)
            raise
        if self.outages.recovered(location_of(queue), queue):
            logger.info("worker %s: queue %s: Redis reachable again", self.worker_id, queue)
        self._pickup = None
        return queue, reserved, pickup.sent_at

    def _settle_pickup(self) -> None:
        """At exit: hold the jobs of a reserve sent behind the idle ``BLPOP`` and not taken
        (a stop came in the wait), to be handed back with the other held jobs."""
        if self._pickup is None:
            return
        try:
            queue, reserved, reserved_at = self._take_pickup(self._pickup)
        except (RedisUnavailable, redis.RedisError) as exc:
            logger.error(
                "worker %s: queue %s: could not read the reserve sent while idle (%s); "
                "a job it reserved stays reserved until its lease runs out",
                self.worker_id,
                self._pickup.queue,
                exc,
            )
            return
        jobs = [Job.from_fields(job_id, fields) for job_id, fields in reserved.jobs]
        self._prefetched.add(queue, jobs, since=reserved_at)

    def _start(self, queue: str, reserved: transitions.Reserved, reserved_at: float) -> bool:
        """Run the first job of a reservation of ``queue`` requested at ``reserved_at``
        (``time.monotonic()``) and hold the rest; return whether it had any."""
        self.next_slots.note(queue, reserved.wait_ms)
        if not reserved.jobs:
            return False
        jobs = [Job.from_fields(job_id, fields) for job_id, fields in reserved.jobs]
        self._prefetched.add(queue, jobs[1:], since=reserved_at)
        if self._prefetched.first_may_run(queue, jobs[0], reserved_at):
            self._run(queue, jobs[0])
        return True

    def server_failed(self, queue: str, server: Location, exc: RedisUnavailable) -> None:
        """A call to ``queue``'s Redis failed: leave its queues out until its retry time
        (``queue`` alone when its cluster slot is moving:
        :class:`~django_rqueue.exceptions.SlotMoving`)."""
        delay = self.outages.failed(server, queue=queue, error=exc)
        logger.error(
            "worker %s: queue %s: %s; leaving its Redis out for %.1f s",
            self.worker_id,
            queue,
            exc,
            delay,
        )

    def _run(self, queue: str, job: Job[Any]) -> None:
        """Run a reserved job: alone here, or, an async one, on the event loop with the
        async jobs that follow it (:class:`~.async_runner.AsyncRunner`)."""
        if not is_async_job(job):
            self.process(queue, job)
            self.processed += 1
            return
        if self._async is None:
            self._async = AsyncRunner(self, self._prefetched, self.async_concurrency)
        self._collect_acks()  # acks still owed by sync jobs: read before the session
        self.processed += self._async.run(queue, job)

    def process(self, queue: str, job: Job[Any]) -> None:
        """Run one reserved job and report its outcome, fenced by its token."""
        started = time.monotonic()
        self._cancel_target, self._cancel_asked = job.id, False
        if self.hooks is not None:
            self.hooks.started(queue, job)
        keeper = None
        if self.renew_leases:
            keeper = LeaseKeeper(queue, job.id, job.token, get_config().lease)
            keeper.start()
        job_function: JobSpec | None = None
        try:
            try:
                job_function = registry.resolve(job)
            except UnknownJob as unknown:
                outcome = failure(unknown)
            else:
                outcome = self._execute(job_function, job)
        finally:
            self._cancel_target = None
            if keeper is not None:
                keeper.done.set()
        ran = time.monotonic() - started
        cancelled = isinstance(outcome.exception, JobCancelled)
        # A corrupt record cannot be repaired by running it again: no retry; nor a cancelled job.
        delay = None if job.problems or cancelled else next_delay(job_function, job, outcome)
        first = self.order.leads(queue)
        if first:
            before = self._run_times.get(queue)
            self._run_times[queue] = ran if before is None else 0.8 * before + 0.2 * ran
            self._quiet[queue] = not signals.job_succeeded.has_listeners(job_function)
        prefetch = (
            outcome.ok
            and first
            and not self.stopping
            and (self.hooks is not None or self._quiet[queue])
            and self._limit_reached(self.processed + 1) is None
        )
        if cancelled:
            self._collect_acks()
            result = deliver_cancel(queue, job)
        else:
            result = self._report(queue, job, outcome, delay, prefetch=prefetch)
        if self.hooks is not None:
            self.hooks.finished(job, result)
        conclude(job_function, job, queue, outcome, result, delay, duration=ran)

    def _execute(self, job_function: JobSpec, job: Job[Any]) -> Outcome:
        if job.problems:
            return failure(ValueError(f"job record is corrupt: {'; '.join(job.problems)}"))
        close_old_connections()
        timer = job.timeout > 0 and threading.current_thread() is threading.main_thread()
        if timer:
            previous = signal.signal(signal.SIGALRM, _raise_timeout(job.timeout))
            signal.setitimer(signal.ITIMER_REAL, job.timeout)
        try:
            if self._cancel_asked:
                return failure(JobCancelled(f"job {job.id} was cancelled before it started"))
            self._in_job = True
            return run_attempt(job_function, job)
        except (JobTimeout, JobCancelled) as exc:  # fired after the job returned
            return failure(exc)
        finally:
            self._in_job = False
            if timer:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)
            close_old_connections()

    def _report(
        self, queue: str, job: Job[Any], outcome: Outcome, delay: float | None, *, prefetch: bool
    ) -> AttemptOutcome:
        """Deliver ack/fail, retrying while Redis is unreachable; return the outcome.

        ``prefetch``: a success of a queue that may lead a fetch. With more
        jobs of a batch still to run (and no ``job_succeeded`` receivers to
        run after the ack), send the ack without waiting for its reply;
        otherwise ack it with ``ack_reserve.lua`` and keep the jobs it
        reserves (a batch when :meth:`_batch_size` allows, as many as
        :meth:`~.weights.QueueOrder.continue_with` says) for the next
        :meth:`work_once` calls.
        """
        ref = queue_ref(queue)
        result = seal(outcome.result_json or "null")  # RQUEUE["ENCRYPTION_KEYS"]
        ack = PendingAck(queue, ref.keys, job.id, job.token, result, job.result_ttl)
        if prefetch and self._prefetched and self._quiet[queue] and self.hooks is not None:
            client = ref.client()
            if self._acks is not None and self._acks.wire.client is not client:
                self._collect_acks()  # another queue's Redis: one stream per connection
                self._acks.close()
                self._acks = None
            if self._acks is None:
                self._acks = AckStream(client)
            self._acks.send(ack)
            # A refusal (stale token) is logged when the reply is read.
            return AttemptOutcome.SUCCEEDED
        self._collect_acks()
        count = 0
        # A queue before its next slot would hand out nothing: a plain ack.
        if outcome.ok and prefetch and not self._prefetched and not self.next_slots.limited(queue):
            count = self.order.continue_with(queue, self._batch_size(queue))
        if count:
            reserved_at = time.monotonic()  # before the request (see prefetch.py)
            try:
                stale, reserved = transitions.ack_and_reserve(
                    ref.client(),
                    ref.keys,
                    job.id,
                    job.token,
                    result,
                    job.result_ttl,
                    lease_ms=ref.lease_ms,
                    worker_id=self.worker_id,
                    count=count,
                    group_concurrency=ref.config.group_concurrency,
                    rate_limit=ref.config.rate_limit,
                )
            except RedisUnavailable:
                pass  # resent below as a plain ack: a repeat must not reserve more jobs
            else:
                self.next_slots.note(queue, reserved.wait_ms)
                jobs = [Job.from_fields(*r) for r in reserved.jobs]
                self._prefetched.add(queue, jobs, since=reserved_at)
                if stale is not None:
                    logger.error("%s; discarding this run", stale)
                    return AttemptOutcome.DISCARDED
                return AttemptOutcome.SUCCEEDED
        if outcome.ok:
            return deliver_ack(ack)
        return deliver_failure(queue, job, outcome, delay)

    # -- idle ------------------------------------------------------------

    def _drained(self) -> bool:
        """Whether no job is running on the queues, nor queued on one that is not paused.

        A paused queue's jobs are not waited for (RQ's burst worker exits when
        suspended the same way): nothing would hand them out before a resume.
        """
        for queue in self.queues:
            ref = queue_ref(queue)
            keys, client = ref.keys, ref.client()
            with redis_errors(client):
                pipe = client.pipeline(transaction=False)
                pipe.zcard(keys.prios)
                pipe.zcard(keys.reserved)
                pipe.exists(keys.paused)
                queued, running, paused = pipe.execute()
            if running or (queued and not paused):
                return False
        return True

    def idle_wait(self) -> IdleWait:
        """What an idle worker blocks on, and how long.

        The ``notify`` lists of every queue, whatever its server or cluster
        slot (:mod:`~.idle` blocks on them all at once), less those of
        rate-limited queues before their next slot (a token there must not
        wake it for an empty reservation), maybe none; for :data:`IDLE_BLOCK`
        seconds, or only until the earliest next slot of a rate-limited queue
        (at least :data:`MIN_BLOCK`).
        """
        queues = [q for q in self.queues if not self.next_slots.limited(q)]
        notify = [queue_ref(q).keys.notify for q in queues]
        seconds = IDLE_BLOCK
        slot = self.next_slots.seconds_to_next()
        if slot is not None:
            seconds = max(MIN_BLOCK, min(seconds, slot))
        return IdleWait(notify, seconds, queues)

    def _wait_for_work(self) -> None:
        """Block until a queue gets a wake-up token or the :meth:`idle_wait` passes
        (servers down are left out: :attr:`idle`).

        A worker of one queue sends the reserve its next :meth:`work_once` would
        send behind the ``BLPOP``, in the same write (:meth:`~.idle.IdleWaiter.wait_then`):
        Redis reserves the moment the ``BLPOP`` returns, and the job starts one round
        trip after its wake-up token came instead of two. A ``BLPOP`` that timed out
        is followed by a reserve too, as before (it finds nothing, or a job that came
        without a token). The reserve is noted (:class:`Pickup`) before it is sent: a
        reply lost with its connection (an error, a stop signal raised in the wait)
        is asked for again with the same request id on another connection, so the
        jobs it reserved are run, or handed back at exit, never left reserved.

        Its jobs are dated by when the reserve was sent, not by when its reply was
        read: a reply that waited while the worker was paused or cut off looks
        fresh when read, though its leases may have run out and its jobs run
        elsewhere meanwhile. So a job that came after a third of a lease of idle
        waiting (only with a ``LEASE`` under three times :data:`IDLE_BLOCK`) is
        confirmed with one lease renewal before it starts.
        """
        wait = self.idle_wait()
        if not wait.notify:  # every queue here waits for its next slot
            self._pause(wait.seconds)
            return
        pickup = self._pickup_for(wait)
        if pickup is None:
            self.idle.wait(wait.lists(), wait.seconds)
            return
        command = transitions.reserve_command(pickup.call)
        self._pickup = pickup  # before the write: from here on it may run in Redis
        pickup.sent_at = time.monotonic()
        woken = self.idle.wait_then(wait.lists(), wait.seconds, command)
        if not woken.sent:  # a cluster, or its server down: work_once reserves as before
            self._pickup = None
            return
        pickup.reply = woken.reply

    def _pickup_for(self, wait: IdleWait) -> Pickup | None:
        """The reserve to send behind the idle ``BLPOP`` of ``wait``: the one the next
        :meth:`work_once` would send, when the wait covers exactly the queue it asks
        (a worker of one queue, not held back by its rate limit); else ``None``."""
        if len(self.queues) != 1 or wait.queues != self.queues or self._prefetched:
            return None
        queue = self.queues[0]
        count = self.order.run(queue, self._batch_size(queue))
        ref = queue_ref(queue)
        call = calls.reserve(
            ref.keys,
            lease_ms=ref.lease_ms,
            worker_id=self.worker_id,
            count=count,
            request_id=transitions.new_request_id(),
            group_cap=ref.config.group_concurrency,
            rate_limit=ref.config.rate_limit,
        )
        return Pickup(queue, call)


def _raise_timeout(seconds: float) -> Any:  # a signal handler
    def handler(signum: int, frame: FrameType | None) -> None:
        raise soft_timeout(seconds)

    return handler
