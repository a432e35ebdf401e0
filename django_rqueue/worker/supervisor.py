"""The prefork supervisor behind ``manage.py rqueue_work``.

A master process forks ``concurrency`` worker children (and one poller child
unless told not to) and supervises them, like Celery's prefork pool and the
master-worker model of PHP delay queues:

- Children reserve and run jobs (:class:`~.loop.Worker`; up to
  ``async_concurrency`` ``async def`` jobs at once) and tell the master over
  a pipe which jobs they run. The master renews every running job's lease
  (fenced by its token) every third of ``RQUEUE["LEASE"]``, so a job stuck
  in C code keeps its lease while the worker lives.
- At ``timeout`` the child raises :class:`~.exceptions.JobTimeout` in the job
  (soft); at ``timeout + grace`` the master SIGKILLs the child's process
  group, fails the attempt of the job that overran ("hard timeout after N
  s"), applies the retry policy, hands the child's other running jobs back
  without spending an attempt and forks a new child. A child that dies
  mid-job has the attempts of the jobs it ran failed with "worker process
  died (signal/exit code)" the same way.
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

Signals (``job_retrying``/``job_failed``) for attempts the master fails on a
dead child's behalf are sent from the master, the only process left.
"""

from __future__ import annotations

import datetime
import logging
import os
import selectors
import signal
import socket
import sys
import time
from collections.abc import Mapping
from types import FrameType

import redis
from django import db
from django.core.checks import CheckMessage

from .. import registry
from .. import signals as rqueue_signals
from ..conf import get_config
from ..engine import transitions
from ..engine.connection import get_client, location_of, redis_errors, redis_time_ms
from ..engine.keys import JobFields
from ..engine.queue_ref import queue_ref
from ..exceptions import (
    JobCancelled,
    JobTimeout,
    LeaseLost,
    RedisUnavailable,
    StartupError,
    WorkerLost,
)
from ..health import NO_UNBLOCK, problems_by_server
from ..job import Job
from . import cancelling, heartbeat
from .blocking import unblock_refused
from .children import Child, ChildKind, KillReason, Running, run_child
from .hooks import AttemptOutcome
from .outages import Outages
from .process import kill_group, new_worker_id, send_signal
from .reconnect import Reconnect
from .reporting import (
    cancel_lost_attempt,
    fail_lost_attempt,
    hand_back,
    read_record,
)
from .settings import WorkerSettings

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


#: The check id of a Redis that does not answer (:func:`~django_rqueue.health.redis_problems`).
UNREACHABLE = "rqueue.E013"


def _unreachable(problems: list[CheckMessage]) -> bool:
    """Whether the problems of one Redis say it (or a node of its cluster) does not answer."""
    return any(p.id == UNREACHABLE for p in problems)


class Supervisor:
    """Run ``concurrency`` worker children over ``queues`` until stopped."""

    def __init__(
        self,
        queues: list[str],
        *,
        weights: Mapping[str, int] | None = None,
        concurrency: int,
        burst: bool = False,
        max_jobs: int | None = None,
        max_memory_mb: float | None = None,
        shutdown_timeout: float = 30.0,
        timeout_grace: float | None = None,
        with_poller: bool = True,
        worker_id: str | None = None,
        async_concurrency: int | None = None,
    ) -> None:
        config = get_config()
        #: What every worker child serves, checked now (a ValueError here, not in every child).
        self.settings = WorkerSettings(
            tuple(queues),
            weights=weights,
            burst=burst,
            max_jobs=max_jobs,
            max_memory_mb=max_memory_mb,
            async_concurrency=async_concurrency,
        ).checked()
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
        self.processed = 0
        self.failed = 0
        self.next_heartbeat = 0.0
        #: Backoff while Redis is unreachable: no Redis call before ``redis_retry_at``.
        self.reconnect = Reconnect(base=TICK, cap=REDIS_RETRY_MAX)
        self.redis_retry_at = 0.0
        self.redis_down_since: float | None = None
        #: No look for cancel requests (cancelling.py) before this ``time.monotonic()``.
        self.next_cancel_check = 0.0
        self.pending_reports: list[tuple[Running, BaseException]] = []
        #: Servers whose lease renewals failed lately (skipped until their retry time).
        self.outages = Outages()
        #: ``time.monotonic()`` before which the next pass does not start (:data:`PASS_GAP`).
        self.next_pass = 0.0

    # -- startup -----------------------------------------------------------

    def check_redis(self) -> None:
        """Refuse to start on a misconfigured Redis; log warnings.

        Waits (with backoff) while no Redis of the queues answers; starts once
        one does, with a warning naming each that does not (the worker serves
        the others and keeps trying it: :mod:`~.outages`).

        Raises:
            StartupError: an error-level problem of a Redis that answers (eviction
                policy, credentials, a command or key pattern its user's ACL lacks).
        """
        errors = []
        reconnect = Reconnect()
        found = problems_by_server(self.queues)
        down_since = None
        while all(_unreachable(p) for p in found.values()) and not self.signals:
            if down_since is None:
                down_since = time.monotonic()
                first = next(p for ps in found.values() for p in ps if p.id == UNREACHABLE)
                self._redis_unavailable(RedisUnavailable(first.msg))
            delay = reconnect.next_delay()
            reasons = "; ".join(p.msg for ps in found.values() for p in ps if p.id == UNREACHABLE)
            logger.error(
                "worker %s: no Redis of its queues answers (%s); retrying in %.1f s",
                self.worker_id,
                reasons,
                delay,
            )
            time.sleep(delay)
            found = problems_by_server(self.queues)
        if self.signals:
            return  # stopped before any Redis answered: nothing was started
        if down_since is not None and not all(_unreachable(p) for p in found.values()):
            self._redis_recovered(time.monotonic() - down_since)
        for server, problems in found.items():
            if any(p.id == NO_UNBLOCK for p in problems):  # warned below; children inherit it
                unblock_refused(server, server.display, report=False)
        for problem in (p for problems in found.values() for p in problems):
            if problem.id == UNREACHABLE:
                logger.warning(
                    "worker %s: starting without it: %s (its queues are served once it answers)",
                    self.worker_id,
                    problem.msg,
                )
            elif problem.is_serious():
                errors.append(f"{problem.id}: {problem.msg} {problem.hint or ''}".strip())
            else:
                logger.warning("%s: %s %s", problem.id, problem.msg, problem.hint or "")
        if errors:
            raise StartupError("refusing to start:\n" + "\n".join(errors))

    def run(self) -> int:
        """Supervise until stopped; return the exit status. Re-execs on ``rqueue_restart``."""
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._on_signal)
        self.check_redis()
        if self.signals:
            return 0
        registry.autodiscover()
        self._log_registry()
        self.started_ms = redis_time_ms(get_client())
        logger.info(
            "worker %s: %d child(ren) serving %s",
            self.worker_id,
            self.concurrency,
            ", ".join(self.queues),
        )
        for _ in range(self.concurrency):
            self._spawn(ChildKind.WORKER)
        if self.with_poller:
            self._spawn(ChildKind.POLLER)
        while self.children or self.respawns:
            self._tick()
        self._unpublish()
        if self.restarting:
            logger.info("worker %s: re-executing for rqueue_restart", self.worker_id)
            sys.stdout.flush()
            sys.stderr.flush()
            os.execv(sys.executable, sys.orig_argv)  # noqa: S606 - our own command line
        logger.info("worker %s: exited cleanly", self.worker_id)
        return 0

    def _log_registry(self) -> None:
        """Log how many jobs this worker can run and from which modules (each name at DEBUG,
        ``-v 2``)."""
        by_module = registry.modules()
        count = sum(len(names) for names in by_module.values())
        if not count:
            logger.warning(
                "worker %s: no @job is registered (workers import the 'jobs' module of every "
                "app in INSTALLED_APPS); only django.tasks tasks can run",
                self.worker_id,
            )
            return
        logger.info(
            "worker %s: %d job(s) registered from %s",
            self.worker_id,
            count,
            ", ".join(by_module),
        )
        for names in by_module.values():
            for name in names:
                logger.debug("worker %s: job %s", self.worker_id, name)

    # -- children ----------------------------------------------------------

    def _spawn(self, kind: ChildKind) -> None:
        db.connections.close_all()
        read_fd, write_fd = os.pipe()
        # The cancel pipe, master to a worker child (cancelling.py).
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
        self.children[pid] = Child(pid=pid, fd=read_fd, kind=kind, cancel_fd=cancel_write)
        self.selector.register(read_fd, selectors.EVENT_READ, pid)

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
        for prefetched in child.prefetched.values():  # never started: no attempt spent
            self._hand_back(prefetched)
        child.prefetched.clear()
        for running in child.running.values():
            if running.job_id in child.cancelling:  # its cancel was asked: no retry
                self._fail_attempt(running, JobCancelled(self._cancel_reason(child, status)))
            elif child.killed_for is None or running.job_id in child.culprits:
                self._fail_attempt(running, self._death_reason(child, status, running))
            else:  # killed for another job, or at shutdown: no attempt spent
                self._hand_back(running)
        child.running.clear()
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

    @staticmethod
    def _cancel_reason(child: Child, status: int) -> str:
        if child.killed_for is KillReason.CANCEL:
            return "cancelled: killed after the grace period"
        return f"cancelled: the worker process ended meanwhile (status {status})"

    def _death_reason(self, child: Child, status: int, running: Running) -> BaseException:
        if child.killed_for is KillReason.TIMEOUT:
            return JobTimeout(f"hard timeout after {child.culprits[running.job_id]:.0f} s")
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            return WorkerLost(f"worker process died (signal {sig}, {signal.Signals(sig).name})")
        return WorkerLost(f"worker process died (exit code {os.WEXITSTATUS(status)})")

    # -- reports on a dead child's behalf ------------------------------------

    def _fail_attempt(self, running: Running, exc: BaseException) -> None:
        try:
            self._report_failure(running, exc)
        except RedisUnavailable as error:
            logger.warning("cannot report %s yet (%s); will retry", running.job_id, error)
            self.pending_reports.append((running, exc))

    def _report_failure(self, running: Running, exc: BaseException) -> None:
        if isinstance(exc, JobCancelled):
            cancel_lost_attempt(running.queue, running.job_id, running.token, str(exc))
            return
        reported = fail_lost_attempt(running.queue, running.job_id, running.token, exc)
        if reported is AttemptOutcome.FAILED:
            self.failed += 1

    def _hand_back(self, running: Running) -> None:
        hand_back(running.queue, running.job_id, running.token)

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
        if now >= self.redis_retry_at:
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
            exc = failures[0]
            self.redis_retry_at = time.monotonic() + self.reconnect.next_delay()
            if self.redis_down_since is None:
                self.redis_down_since = now
                logger.warning("worker %s: %s; retrying", self.worker_id, exc)
                self._redis_unavailable(exc)
            else:
                logger.debug("worker %s: %s", self.worker_id, exc)
            return
        if self.redis_down_since is not None:
            logger.info(
                "worker %s: Redis reachable again after %.1f s",
                self.worker_id,
                now - self.redis_down_since,
            )
            self._redis_recovered(now - self.redis_down_since)
        self.reconnect.reset()
        self.redis_down_since = None

    def _cancel_step(self, now: float) -> None:
        if now >= self.next_cancel_check:
            self._look_for_cancels(now)
            self.next_cancel_check = now + cancelling.POLL

    def _report_step(self, now: float) -> None:
        self._retry_reports()

    def _beat_step(self, now: float) -> None:
        if now >= self.next_heartbeat:
            self._heartbeat()
            self.next_heartbeat = now + min(HEARTBEAT, get_config().lease / 3)

    def _redis_unavailable(self, exc: RedisUnavailable) -> None:
        """Send ``redis_unavailable`` (once per outage: the callers' first failure)."""
        rqueue_signals.send(
            rqueue_signals.redis_unavailable,
            self.worker_id,
            worker_id=self.worker_id,
            error=exc,
            since=datetime.datetime.now(datetime.UTC),
        )

    def _redis_recovered(self, downtime: float) -> None:
        """Send ``redis_recovered`` with the outage's length in seconds."""
        rqueue_signals.send(
            rqueue_signals.redis_recovered,
            self.worker_id,
            worker_id=self.worker_id,
            downtime=downtime,
        )

    def _look_for_cancels(self, now: float) -> None:
        """Ask the children to stop the running jobs whose cancel was asked (cancelling.py):
        one pipelined ``HGET`` of each running job's request field per Redis."""
        watched = [
            (child, running)
            for child in self.children.values()
            if child.kind is ChildKind.WORKER and not child.killed_for
            for running in child.running.values()
            if running.job_id not in child.cancelling
        ]
        if not watched:
            return
        by_client: dict[int, tuple[redis.Redis, list[tuple[Child, Running]]]] = {}
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
                    requested = pipe.execute()
            except RedisUnavailable as exc:  # that server only: look at the others
                failed = exc
                continue
            for (child, running), asked in zip(entries, requested, strict=True):
                if asked is None or not child.runs(running):
                    continue
                logger.info(
                    "%s %s: cancel requested; stopping it in child %d (killed after %g s)",
                    running.name,
                    running.job_id,
                    child.pid,
                    self.timeout_grace,
                )
                child.cancelling[running.job_id] = now + self.timeout_grace
                cancelling.send_request(child.cancel_fd, child.pid, running.job_id)
        if failed is not None:
            raise failed

    def _renew_leases(self, now: float) -> None:
        """Renew every lease due, server by server: a server that fails is left out until
        its retry time (:mod:`~.outages`; a queue whose cluster slot is moving, alone) and
        the others' renewals go on; the first failure is raised at the end."""
        lease = get_config().lease
        failed: RedisUnavailable | None = None
        for child in self.children.values():
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

    def _renew(self, child: Child, running: Running, now: float, lease: float) -> None:
        running.renew_at = now + lease / 3
        ref = queue_ref(running.queue)
        try:
            transitions.renew_lease(
                ref.client(), ref.keys, running.job_id, running.token, ref.lease_ms
            )
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

    def _lease_lost(self, child: Child, running: Running, exc: LeaseLost) -> None:
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
        self._read(child)
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

    def _retry_reports(self) -> None:
        pending, self.pending_reports = self.pending_reports, []
        for index, (running, exc) in enumerate(pending):
            try:
                self._report_failure(running, exc)
            except RedisUnavailable:
                self.pending_reports.extend(pending[index:])
                raise

    def _enforce_timeouts(self, now: float) -> None:
        for child in self.children.values():
            if child.killed_for:
                continue
            overdue = [
                job_id
                for job_id, deadline in child.cancelling.items()
                if now >= deadline and job_id in child.running
            ]
            if overdue:
                logger.warning(
                    "%s still running %g s after its cancel; killing child %d",
                    ", ".join(overdue),
                    self.timeout_grace,
                    child.pid,
                )
                child.killed_for = KillReason.CANCEL
                kill_group(child.pid)
                continue
            for running in child.running.values():
                ran = now - running.started
                if running.timeout > 0 and ran >= running.timeout + self.timeout_grace:
                    logger.warning(
                        "%s %s: hard timeout after %.1f s; killing child %d",
                        running.name,
                        running.job_id,
                        ran,
                        child.pid,
                    )
                    child.culprits[running.job_id] = ran
            if child.culprits:
                child.killed_for = KillReason.TIMEOUT
                kill_group(child.pid)

    def _heartbeat(self) -> None:
        config = get_config()
        info = heartbeat.WorkerInfo(
            id=self.worker_id,
            host=socket.gethostname(),
            pid=os.getpid(),
            queues=tuple(self.queues),
            concurrency=self.concurrency,
            jobs=tuple(
                heartbeat.WorkerJob(r.job_id, r.queue, c.pid)
                for c in self.children.values()
                for r in c.running.values()
            ),
            processed=self.processed,
            failed=self.failed,
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
        for child in self.children.values():
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
