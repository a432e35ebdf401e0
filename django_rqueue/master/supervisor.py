"""The prefork supervisor behind ``manage.py rqueue_work``: it forks, reaps, respawns and stops
the children, and runs the master's tick.

A master process forks ``concurrency`` worker children (and one poller child
unless told not to) and supervises them, like Celery's prefork pool and the
master-worker model of PHP delay queues:

- Children reserve and run jobs (:class:`~django_rqueue.worker.loop.Worker`; up
  to ``async_concurrency`` ``async def`` jobs at once) and tell the master over
  a pipe which jobs they run (:mod:`~.children`). The master renews every
  running job's lease (:mod:`~.renewals`), so a job stuck in C code keeps its
  lease while the worker lives, and carries out cancel requests (:mod:`~.cancels`).
- At ``timeout`` the child raises :class:`~django_rqueue.exceptions.JobTimeout`
  in the job (soft); at ``timeout + grace`` the master SIGKILLs the child's
  process group (:mod:`~.timeouts`) and forks a new child; what the child left
  is reported on its behalf (:mod:`~.losses`: "hard timeout after N s", "worker
  process died", hand-backs).
- ``max_jobs`` / ``max_memory_mb``: a child exits after the job that crosses
  the limit and is replaced.
- SIGTERM/SIGINT: children stop reserving, running jobs get
  ``shutdown_timeout`` seconds to finish, then they are killed and their jobs
  handed back without spending an attempt; a second signal skips the wait.
  Children ignore SIGTERM/SIGINT (signals sent to a whole process group are
  as graceful as one sent to the master) and die with the master
  (``PR_SET_PDEATHSIG``).
- ``rqueue_restart``: seen at the next heartbeat; the master stops like on
  SIGTERM, then re-execs itself with the same command line.
- Each heartbeat publishes the worker in the registry (:mod:`~.heartbeat`).
- It starts once a Redis of its queues answers (:mod:`~.startup`), and backs
  off while Redis is unreachable (:mod:`~.reachability`).
- The process signals (:mod:`~.lifecycle`): ``worker_process_init`` in the master
  before the first fork and in each child (worker or poller) after its fork;
  ``worker_process_shutdown`` in each child before it exits (the poller when it
  crashed: it is killed at a stop) and in the master once its children are gone.
"""

from __future__ import annotations

import logging
import os
import selectors
import signal
import socket
import sys
import time
from types import FrameType

from django import db

from .. import registry
from ..conf import get_config
from ..engine.connection import get_client, redis_time_ms
from ..exceptions import RedisUnavailable
from ..ops.workers import WorkerInfo, WorkerJob
from ..signals import ProcessRole
from ..worker.hooks import AttemptOutcome
from ..worker.process import new_worker_id
from ..worker.settings import WorkerSettings
from . import heartbeat
from .cancels import CancelWatch
from .children import Child, ChildKind, KillReason, run_child
from .lifecycle import process_exiting, process_started
from .losses import Losses
from .process import kill_group, send_signal
from .reachability import Reachability
from .renewals import Renewals
from .startup import check_redis, log_registry
from .timeouts import stop_overrun

logger = logging.getLogger("django_rqueue.supervisor")

#: Seconds between the master's passes over its children when nothing happens.
TICK = 0.1
#: Shortest time in seconds between two passes that read the children's pipes: busy
#: children's messages wait in their pipes meanwhile and are read together, so the
#: master wakes at most ``1 / PASS_GAP`` times a second, not once per job.
PASS_GAP = 0.01
#: Longest heartbeat interval in seconds (it is also at most a third of the lease).
HEARTBEAT = 5.0
#: Longest pause in seconds between the master's attempts to reach Redis while it is
#: unreachable (backoff with jitter): short, so leases are renewed soon after it returns.
REDIS_RETRY_MAX = 1.0


class Supervisor:
    """Run ``concurrency`` worker children serving ``settings`` until stopped.

    ``shutdown_timeout`` (seconds): how long running jobs get to finish at a stop.
    ``timeout_grace`` (seconds; ``None``: ``RQUEUE["TIMEOUT_GRACE"]``): between a job's
    soft and hard timeout, and between a cancel request and the kill. ``with_poller``:
    fork a poller child too. ``worker_id``: the master's id (``None``: a new one).

    Raises:
        ValueError: as :meth:`WorkerSettings.checked
            <django_rqueue.worker.settings.WorkerSettings.checked>`.
    """

    def __init__(
        self,
        settings: WorkerSettings,
        *,
        concurrency: int,
        shutdown_timeout: float = 30.0,
        timeout_grace: float | None = None,
        with_poller: bool = True,
        worker_id: str | None = None,
    ) -> None:
        config = get_config()
        #: What every worker child serves, checked now (a ValueError here, not in every child).
        self.settings = settings.checked()
        self.queues = list(self.settings.queues)
        self.concurrency = concurrency
        self.shutdown_timeout = shutdown_timeout
        self.timeout_grace = config.timeout_grace if timeout_grace is None else timeout_grace
        self.with_poller = with_poller
        self.worker_id = worker_id or new_worker_id()
        self.children: dict[int, Child] = {}
        #: (monotonic time, kind) of children to fork later (after a crash at startup).
        self.respawns: list[tuple[float, ChildKind]] = []
        self.selector = selectors.DefaultSelector()
        self.signals = 0
        self.stop_deadline: float | None = None
        self.restarting = False
        self.started_ms = 0
        #: Jobs the children reported ended, and how many of those failed for good (the
        #: attempts the master failed for a dead child are counted in :attr:`losses`).
        self.processed = 0
        self.failed = 0
        self.next_heartbeat = 0.0
        #: Backoff and signals while Redis is unreachable (:mod:`~.reachability`).
        self.redis = Reachability(self.worker_id, base=TICK, cap=REDIS_RETRY_MAX)
        #: Looks for cancel requests of the running jobs (:mod:`~.cancels`).
        self.cancels = CancelWatch(self.timeout_grace)
        #: Reports on dead children's behalf (:mod:`~.losses`).
        self.losses = Losses()
        #: Renews the children's leases (:mod:`~.renewals`).
        self.renewals = Renewals(self._read)
        #: ``time.monotonic()`` before which the next pass does not start (:data:`PASS_GAP`).
        self.next_pass = 0.0

    # -- startup -----------------------------------------------------------

    def check_redis(self) -> None:
        """The startup gate (:func:`~.startup.check_redis`), stopped by a signal.

        Raises:
            StartupError: an error-level problem of a Redis that answers.
        """
        check_redis(
            self.queues,
            worker_id=self.worker_id,
            stopped=lambda: self.signals > 0,
            unavailable=self.redis.unavailable,
            recovered=self.redis.recovered,
        )

    def run(self) -> int:
        """Supervise until stopped; return the exit status. Re-execs on ``rqueue_restart``."""
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._on_signal)
        self.check_redis()
        if self.signals:
            return 0
        registry.autodiscover()
        log_registry(self.worker_id)
        try:
            self.started_ms = redis_time_ms(get_client())
        except RedisUnavailable:
            # REDIS_URL's server does not answer (the queues' own ones do, or it went away
            # since the gate): read at the first heartbeat that reaches it (_heartbeat).
            self.started_ms = 0
        logger.info(
            "worker %s: %d child(ren) serving %s",
            self.worker_id,
            self.concurrency,
            ", ".join(self.queues),
        )
        process_started(ProcessRole.MASTER, self.worker_id)
        master, code = os.getpid(), 1
        try:
            for _ in range(self.concurrency):
                self._spawn(ChildKind.WORKER)
            if self.with_poller:
                self._spawn(ChildKind.POLLER)
            while self.children or self.respawns:
                self._tick()
            code = 0
        finally:
            if os.getpid() == master:  # not in a child unwinding from a failed start
                process_exiting(ProcessRole.MASTER, self.worker_id, code)
        self._unpublish()
        if self.restarting:
            logger.info("worker %s: re-executing for rqueue_restart", self.worker_id)
            sys.stdout.flush()
            sys.stderr.flush()
            os.execv(sys.executable, sys.orig_argv)  # noqa: S606 - our own command line
        logger.info("worker %s: exited cleanly", self.worker_id)
        return 0

    # -- children ----------------------------------------------------------

    def _spawn(self, kind: ChildKind) -> None:
        db.connections.close_all()
        read_fd, write_fd = os.pipe()
        # The cancel pipe, master to a worker child (worker/cancelling.py).
        cancel_read, cancel_write = os.pipe() if kind is ChildKind.WORKER else (-1, -1)
        master = os.getpid()
        pid = os.fork()
        if pid == 0:  # child
            os.close(read_fd)
            if cancel_write >= 0:
                os.close(cancel_write)
                os.set_blocking(cancel_read, False)
            run_child(
                kind,
                write_fd,
                master,
                inherited=[
                    fd
                    for child in self.children.values()
                    for fd in (child.fd, child.cancel_fd)
                    if fd >= 0
                ],
                settings=self.settings,
                worker_id=f"{self.worker_id}/{os.getpid()}",
                cancel_fd=cancel_read if cancel_read >= 0 else None,
            )
        os.close(write_fd)
        if cancel_read >= 0:
            os.close(cancel_read)
            os.set_blocking(cancel_write, False)
        try:
            os.setpgid(pid, pid)  # also done by the child: whoever runs first wins the race
        except OSError:
            pass
        os.set_blocking(read_fd, False)
        child = Child(pid=pid, fd=read_fd, kind=kind, cancel_fd=cancel_write)
        self.children[pid] = child
        self.selector.register(read_fd, selectors.EVENT_READ, pid)
        if self.stop_deadline is not None:
            # A stop began after the decision to fork (its signal's handler ran between
            # them, and found no such child to tell): tell it now.
            self._stop_child(child)

    def _read(self, child: Child) -> None:
        for outcome in child.read(get_config().lease):
            if outcome != AttemptOutcome.RELEASED:  # reserved ahead, handed back unstarted
                self.processed += 1
            if outcome == AttemptOutcome.FAILED:
                self.failed += 1

    def _reap(self) -> None:
        while True:
            try:  # look before reaping: an unreaped child's pid (its group's id) cannot be reused
                exited = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            if exited is None or exited.si_pid == 0:
                return
            if exited.si_pid in self.children:
                kill_group(exited.si_pid)  # what its jobs started and left behind goes with it
            pid, status = os.waitpid(exited.si_pid, 0)
            child = self.children.pop(pid, None)
            if child is None:
                continue
            self._read(child)
            self.selector.unregister(child.fd)
            os.close(child.fd)
            if child.cancel_fd >= 0:
                os.close(child.cancel_fd)
            self._child_exited(child, status)

    def _child_exited(self, child: Child, status: int) -> None:
        self.losses.settle(child, status)
        stopping = self.stop_deadline is not None
        clean = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        if child.kind is ChildKind.WORKER and not stopping and not (self.settings.burst and clean):
            self._respawn(child, clean)
        elif child.kind is ChildKind.POLLER and not stopping:
            self._respawn(child, clean)
        if (
            self.settings.burst
            and not stopping
            and not any(c.kind is ChildKind.WORKER for c in self.children.values())
            and not any(kind is ChildKind.WORKER for _, kind in self.respawns)
        ):
            self._begin_stop()

    def _respawn(self, child: Child, clean: bool) -> None:
        """Replace ``child``; 1 s later if it died right after starting.

        Never by sleeping here: the master must keep renewing the leases of
        the jobs its other children run (and enforcing their timeouts).
        """
        if not clean and not child.killed_for and time.monotonic() - child.born < 1.0:
            # A child that cannot even start (bad code, Redis refusing): do not spin.
            logger.error("child %d died within 1 s of starting; replacing it in 1 s", child.pid)
            self.respawns.append((time.monotonic() + 1.0, child.kind))
        else:
            self._spawn(child.kind)

    def _spawn_due(self, now: float) -> None:
        if self.stop_deadline is not None:
            self.respawns.clear()
            return
        due = [kind for at, kind in self.respawns if at <= now]
        self.respawns = [(at, kind) for at, kind in self.respawns if at > now]
        for kind in due:
            self._spawn(kind)

    # -- the loop ------------------------------------------------------------

    def _tick(self) -> None:
        pause = self.next_pass - time.monotonic()
        if pause > 0:
            time.sleep(pause)  # a signal's handler still runs meanwhile
        events = self.selector.select(TICK)
        if events:
            self.next_pass = time.monotonic() + PASS_GAP
        for key, _ in events:
            child = self.children.get(key.data)
            if child is not None:
                self._read(child)
        self._reap()
        now = time.monotonic()
        if self.redis.due(now):
            self._talk_to_redis(now)
        self._enforce_timeouts(now)
        self._spawn_due(now)
        if self.stop_deadline is not None and (now >= self.stop_deadline or self.signals > 1):
            self._kill_remaining()

    def _talk_to_redis(self, now: float) -> None:
        """Renew leases, retry failure reports, heartbeat; back off while Redis is unreachable."""
        # Each step runs even when one before failed: with queues on several servers,
        # one down must not stop the renewals of the jobs of the others.
        failures: list[RedisUnavailable] = []
        for step in (self._renew_leases, self._cancel_step, self._report_step, self._beat_step):
            try:
                step(now)
            except RedisUnavailable as failure:
                failures.append(failure)
        if failures:
            self.redis.failed(failures[0], now)
        else:
            self.redis.reached(now)

    def _cancel_step(self, now: float) -> None:
        self.cancels.step(self.children.values(), now)

    def _report_step(self, now: float) -> None:
        self.losses.retry()

    def _beat_step(self, now: float) -> None:
        if now >= self.next_heartbeat:
            self._heartbeat()
            self.next_heartbeat = now + min(HEARTBEAT, get_config().lease / 3)

    def _renew_leases(self, now: float) -> None:
        self.renewals.renew_due(self.children.values(), now)

    def _enforce_timeouts(self, now: float) -> None:
        for child in self.children.values():
            if child.killed_for or self.cancels.stop_overdue(child, now):
                continue
            stop_overrun(child, now, self.timeout_grace)

    def _heartbeat(self) -> None:
        config = get_config()
        if not self.started_ms:  # REDIS_URL's server did not answer at the start
            self.started_ms = redis_time_ms(get_client())
        info = WorkerInfo(
            id=self.worker_id,
            host=socket.gethostname(),
            pid=os.getpid(),
            queues=tuple(self.queues),
            concurrency=self.concurrency,
            jobs=tuple(
                WorkerJob(r.job_id, r.queue, c.pid)
                for c in self.children.values()
                for r in c.running.values()
            ),
            processed=self.processed,
            failed=self.failed + self.losses.failed,
            started_at=self.started_ms,
            poller=self.with_poller,
        )
        restart = heartbeat.publish(info, config.lease)
        if restart > self.started_ms and not self.restarting:
            logger.info("worker %s: restart requested", self.worker_id)
            self.restarting = True
            self._begin_stop()

    def _unpublish(self) -> None:
        try:
            heartbeat.remove(self.worker_id)
        except RedisUnavailable:
            pass

    # -- stopping ------------------------------------------------------------

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.signals += 1
        if self.stop_deadline is None:
            logger.info(
                "worker %s: %s, finishing running jobs (up to %g s)",
                self.worker_id,
                signal.Signals(signum).name,
                self.shutdown_timeout,
            )
            self._begin_stop()
        else:
            logger.info("worker %s: second signal, stopping now", self.worker_id)

    def _begin_stop(self) -> None:
        if self.stop_deadline is None:
            self.stop_deadline = time.monotonic() + self.shutdown_timeout
        for child in list(self.children.values()):
            self._stop_child(child)

    def _stop_child(self, child: Child) -> None:
        """A worker child finishes its job and exits (SIGUSR1); the poller is killed."""
        if child.kind is ChildKind.POLLER:
            kill_group(child.pid)
        else:
            send_signal(child.pid, signal.SIGUSR1)

    def _kill_remaining(self) -> None:
        for child in self.children.values():
            if child.killed_for:
                continue
            child.killed_for = KillReason.HANDBACK
            kill_group(child.pid)


__all__ = ["Supervisor"]
