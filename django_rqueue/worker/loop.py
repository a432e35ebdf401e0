"""The worker loop: reserve, run, report, in one process.

Queues are served in strict order: a job of the first queue always goes
before any job of the second; or, with weights (``--queues high:5,low:1``),
in the weighted random order of :mod:`~.weights`, drawn once per job, so
that reservations ahead (batches, ``ack_reserve.lua``) take more jobs of a
queue only when the draws for those jobs chose it too. When every queue is
empty (or paused) the worker blocks on the queues' ``notify`` lists
(``BLPOP``, :data:`~.reserving.IDLE_BLOCK` seconds at a time; on every server and
cluster slot at once, :mod:`~.idle`) instead of sleeping, so a new job
starts within milliseconds and an idle worker costs Redis about one command
per second. A worker of one queue (on one server, not a cluster) sends its
next reserve in the same write as that ``BLPOP``, so Redis reserves the job
the moment its token comes (one round trip, not two:
``Worker._wait_for_work``). A server that fails is left out, its queues
neither reserved from nor blocked on, until its retry time (:mod:`~.outages`),
while the queues of the others are served. A queue whose ``rate_limit`` held
jobs back is treated as empty until its next slot (:mod:`~.rate_limits`): not
asked, not blocked on, and the idle wait ends at that slot.

Each sync job is run and reported by the worker's
:class:`~.attempt.AttemptLifecycle`: its lease renewed meanwhile (in-process),
its soft ``timeout`` (SIGALRM, main thread only), its cancel, and its ack,
which may reserve the next jobs of the queue in the same round trip
(``ack_reserve.lua``). A job reserved ahead that way and not started because
a stop came in between is handed back without spending an attempt.

Jobs are reserved ahead (the next ones with an ack, or a batch per round
trip while the jobs are short) and held until they run (:mod:`~.prefetch`);
each is confirmed with one lease renewal before it starts when its reserving
request went out a third of a lease or more before, and skipped if its lease
is gone.

Which queue is asked next, for how many jobs, and the reserving calls
themselves are the worker's :class:`~.reserving.Reserver`, shared with the
async runner.

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
from types import FrameType
from typing import Any

from .. import registry
from ..engine import commands
from ..engine.connection import redis_errors
from ..engine.queue_ref import queue_ref
from ..engine.replies import Reserved
from ..exceptions import RedisUnavailable
from ..job import Job
from . import cancelling
from .async_runner import AsyncRunner, is_async_job
from .attempt import AttemptLifecycle
from .hooks import StopRequested, WorkerHooks
from .idle import IdleWaiter
from .limits import Limits
from .poller import Poller
from .prefetch import Prefetched
from .process import new_worker_id
from .reconnect import Reconnect
from .reserving import Reserver
from .settings import WorkerSettings

logger = logging.getLogger("django_rqueue.worker")


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
        settings = WorkerSettings(
            tuple(queues),
            weights=weights,
            burst=burst,
            max_jobs=max_jobs,
            max_memory_mb=max_memory_mb,
            async_concurrency=async_concurrency,
        ).checked()
        self._setup(
            settings,
            with_poller=with_poller,
            worker_id=worker_id,
            renew_leases=renew_leases,
            hooks=hooks,
            cancel_fd=cancel_fd,
        )

    def _setup(
        self,
        settings: WorkerSettings,
        *,
        with_poller: bool,
        worker_id: str | None,
        renew_leases: bool,
        hooks: WorkerHooks | None,
        cancel_fd: int | None,
    ) -> None:
        """Set the worker up to serve ``settings`` (checked: :meth:`WorkerSettings.checked
        <.settings.WorkerSettings.checked>`); the other arguments as :class:`Worker`'s."""
        #: What it serves and for how long, checked (:mod:`~.settings`).
        self.settings = settings
        self.queues = list(settings.queues)
        self.async_concurrency = settings.async_slots
        self.burst = settings.burst
        self.with_poller = with_poller
        self.worker_id = worker_id or new_worker_id()
        self.renew_leases = renew_leases
        self.hooks = hooks
        #: A supervised child's cancel pipe from its master (:mod:`~.cancelling`), or ``None``.
        self.cancel_fd = cancel_fd
        #: What the loop and the async runner share: max_jobs, jobs run, stopping.
        self.limits = Limits(settings.max_jobs, settings.max_memory_mb)
        #: True until :meth:`run` enters its loop, and while reserving or running a job: a
        #: child's stop handler interrupts only an idle worker.
        self.busy = True
        #: Jobs reserved ahead (with the last ack, or in a batch), run next.
        self._prefetched = Prefetched(self.worker_id, hooks)
        #: Which queue next, how many, and the reserving calls (:mod:`~.reserving`).
        self.reserver = Reserver(
            self.queues,
            settings.weights,
            worker_id=self.worker_id,
            limits=self.limits,
            supervised=hooks is not None,
        )
        #: Blocks on every queue's ``notify`` list at once, server by server, slot by slot.
        self.idle = IdleWaiter(self.reserver.outages)
        #: Runs the sync jobs, one at a time, and reports each (:mod:`~.attempt`).
        self.attempts = AttemptLifecycle(
            self.reserver,
            self._prefetched,
            hooks,
            self.limits,
            cancel_fd,
            renew_leases=renew_leases,
        )
        #: Runs the async jobs; made when the first one comes up.
        self._async: AsyncRunner | None = None

    @classmethod
    def supervised(
        cls, settings: WorkerSettings, *, worker_id: str, hooks: WorkerHooks, cancel_fd: int | None
    ) -> Worker:
        """The worker of a child of ``rqueue_work``'s master, which runs the poller and
        renews the leases itself (so this worker does neither) and hears of each job
        through ``hooks``. ``settings`` are used as they are: the master checked them
        (:meth:`WorkerSettings.checked <.settings.WorkerSettings.checked>`) before it forked.
        """
        worker = cls.__new__(cls)
        worker._setup(
            settings,
            with_poller=False,
            worker_id=worker_id,
            renew_leases=False,
            hooks=hooks,
            cancel_fd=cancel_fd,
        )
        return worker

    @property
    def processed(self) -> int:
        """Jobs run so far (kept in its :class:`~.limits.Limits`)."""
        return self.limits.processed

    @processed.setter
    def processed(self, value: int) -> None:
        self.limits.processed = value

    @property
    def stopping(self) -> bool:
        """Whether a stop was requested (kept in its :class:`~.limits.Limits`)."""
        return self.limits.stopping

    @stopping.setter
    def stopping(self, value: bool) -> None:
        self.limits.stopping = value

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
            signal.signal(cancelling.SIGNAL, self.attempts.on_cancel_signal)

    def run(self) -> int:
        """Work until stopped; return the exit status (0).

        A child's stop signal during the start-up is not raised there: it ends the loop
        before its first job (the start-up counts as busy).
        """
        registry.autodiscover()
        poller = Poller(self.queues) if self.with_poller else None
        thread = None
        if poller is not None:
            thread = threading.Thread(target=poller.run, name="rqueue-poller", daemon=True)
            thread.start()
        logger.info("worker %s: serving %s", self.worker_id, ", ".join(self.queues))
        reconnect = Reconnect()
        try:
            self.busy = False  # from here a stop signal may interrupt an idle wait
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
            self.attempts.collect_acks()
            self._settle_pickup()
            self._prefetched.hand_back_all()
            if self.hooks is not None:
                self.hooks.flush()
            if poller is not None and thread is not None:
                poller.halt(thread)
        logger.info("worker %s: exiting after %d job(s)", self.worker_id, self.processed)
        return 0

    def _recycle_due(self) -> bool:
        reason = self.limits.exit_reason(self.processed)
        if reason is not None:
            logger.info("worker %s: %s", self.worker_id, reason)
        return reason is not None

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
            if self.reserver.pickup is not None:
                taken = self.reserver.take_pickup()
                return taken is not None and self._start(*taken)
            for taken in self.reserver.sweep():
                if self._start(*taken):
                    return True
            return False
        finally:
            self.busy = False

    def _settle_pickup(self) -> None:
        """At exit: hold the jobs of a reserve sent behind the idle ``BLPOP`` and not taken
        (a stop came in the wait), to be handed back with the other held jobs."""
        taken = self.reserver.settle_pickup()
        if taken is None:
            return
        queue, reserved, reserved_at = taken
        jobs = [Job.from_fields(job_id, fields) for job_id, fields in reserved.jobs]
        self._prefetched.add(queue, jobs, since=reserved_at)

    def _start(self, queue: str, reserved: Reserved, reserved_at: float) -> bool:
        """Run the first job of a reservation of ``queue`` requested at ``reserved_at``
        (``time.monotonic()``) and hold the rest; return whether it had any."""
        if not reserved.jobs:
            return False
        jobs = [Job.from_fields(job_id, fields) for job_id, fields in reserved.jobs]
        self._prefetched.add(queue, jobs[1:], since=reserved_at)
        if self._prefetched.first_may_run(queue, jobs[0], reserved_at):
            self._run(queue, jobs[0])
        return True

    def _run(self, queue: str, job: Job[Any]) -> None:
        """Run a reserved job: alone here, or, an async one, on the event loop with the
        async jobs that follow it (:class:`~.async_runner.AsyncRunner`)."""
        if not is_async_job(job):
            self.attempts.run(queue, job)
            self.processed += 1
            return
        if self._async is None:
            self._async = AsyncRunner(
                self.reserver,
                self._prefetched,
                self.hooks,
                self.limits,
                self.idle,
                self.cancel_fd,
                slots=self.async_concurrency,
                renew_leases=self.renew_leases,
            )
        self.attempts.collect_acks()  # acks still owed by sync jobs: read before the session
        self.processed += self._async.run(queue, job)

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

    def _wait_for_work(self) -> None:
        """Block until a queue gets a wake-up token or the
        :meth:`~.reserving.Reserver.idle_wait` passes (servers down are left out: :attr:`idle`).

        A worker of one queue sends the reserve its next :meth:`work_once` would
        send behind the ``BLPOP``, in the same write (:meth:`~.idle.IdleWaiter.wait_then`):
        Redis reserves the moment the ``BLPOP`` returns, and the job starts one round
        trip after its wake-up token came instead of two. A ``BLPOP`` that timed out
        is followed by a reserve too (it finds nothing, or a job that came without a
        token). The reserve is noted before it is sent (:class:`~.reserving.Pickup`:
        a lost reply is asked for again under the same request id, and its jobs are
        dated by when it was sent, not by when its reply was read).
        """
        wait = self.reserver.idle_wait()
        if not wait.notify:  # every queue here waits for its next slot
            self._pause(wait.seconds)
            return
        pickup = self.reserver.pickup_for(wait, holding=bool(self._prefetched))
        if pickup is None:
            self.idle.wait(wait.lists(), wait.seconds)
            return
        command = commands.evalsha(pickup.call)
        self.reserver.pickup = pickup  # before the write: from here on it may run in Redis
        pickup.sent_at = time.monotonic()
        woken = self.idle.wait_then(wait.lists(), wait.seconds, command)
        if not woken.sent:  # a cluster, or its server down: work_once reserves as before
            self.reserver.pickup = None
            return
        pickup.reply = woken.reply
