"""The master's children: its record of each child and of the jobs it holds (:class:`ChildJob`),
the pipe between them, and what a forked child runs (:func:`run_child`).

A child tells its master, one JSON line per event, which jobs it holds
(reserved ahead, not started: "prefetch"), which ones it runs ("start", one
line per job) and how each ended ("end", with the outcome word, ``released`` for a
prefetched job handed back). The master keeps that in a :class:`Child`: it renews
the leases of the running and the prefetched jobs, enforces each running job's hard
timeout, and, when the child dies, fails the running jobs' attempts and hands
the prefetched ones back.

:func:`run_child` is what a forked child runs.
"""

from __future__ import annotations

import enum
import json
import logging
import os
import signal
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, NoReturn

from ..engine.connection import reset_after_fork
from ..job import Job
from ..serialization import dumps
from ..signals import ProcessRole
from ..worker.hooks import (
    AttemptOutcome,
    EndMessage,
    Event,
    JobLine,
    PipeMessage,
    PrefetchMessage,
    StartMessage,
    job_line,
)
from ..worker.loop import Worker
from ..worker.poller import Poller
from ..worker.settings import WorkerSettings
from .lifecycle import process_exiting, process_started
from .process import set_pdeathsig

logger = logging.getLogger("django_rqueue.supervisor")


@dataclass
class ChildJob:
    """A job a child told the master it runs (or holds); times are ``time.monotonic()``."""

    queue: str
    job_id: str
    token: int
    name: str
    #: Seconds (the job's own soft timeout; 0 = none).
    timeout: float
    started: float
    renew_at: float


class ChildKind(enum.StrEnum):
    """What a child process of the master does."""

    #: Reserves and runs jobs (:class:`~django_rqueue.worker.loop.Worker`).
    WORKER = "worker"
    #: Promotes due jobs and reclaims expired leases (:class:`~django_rqueue.worker.poller.Poller`).
    POLLER = "poller"


class KillReason(enum.StrEnum):
    """Why the master SIGKILLed a child."""

    #: Its job ran past ``timeout + grace``: the attempt fails.
    TIMEOUT = "timeout"
    #: Shutdown time ran out: its jobs are handed back without spending an attempt.
    HANDBACK = "handback"
    #: A job's lease was lost (reclaimed meanwhile): that run is discarded.
    LEASE = "lease"
    #: A job whose cancel was asked still ran ``grace`` seconds later: it ends cancelled.
    CANCEL = "cancel"


@dataclass
class Child:
    """The master's record of one child process and what it told the master."""

    pid: int
    fd: int
    kind: ChildKind
    #: The write end of its cancel pipe (:mod:`~django_rqueue.worker.cancelling`; -1: none, a
    #: poller child).
    cancel_fd: int = -1
    buffer: bytes = b""
    #: Jobs the child runs ("start" heard, "end" not yet), by id.
    running: dict[str, ChildJob] = field(default_factory=dict)
    #: Jobs reserved ahead by the child and not started yet, by id.
    prefetched: dict[str, ChildJob] = field(default_factory=dict)
    #: ChildJob jobs whose cancel it was asked to carry out, by id, with the
    #: ``time.monotonic()`` deadline of the hard stop.
    cancelling: dict[str, float] = field(default_factory=dict)
    #: Why the master killed it (``None``: not killed).
    killed_for: KillReason | None = None
    #: The running jobs it was killed for (overran, or lost their lease), by id, with
    #: the seconds each had run: their attempts fail, the other running jobs are handed back.
    culprits: dict[str, float] = field(default_factory=dict)
    born: float = field(default_factory=time.monotonic)

    def runs(self, record: ChildJob) -> bool:
        """Whether ``record`` itself (not a later record of the same job) is a running job."""
        return self.running.get(record.job_id) is record

    def holds(self, record: ChildJob) -> bool:
        """Whether ``record`` is still a running or a prefetched job of this child."""
        return self.runs(record) or self.prefetched.get(record.job_id) is record

    def read(self, lease: float) -> Iterator[AttemptOutcome]:
        """Read what the pipe has (non-blocking), apply it, and yield each "end" outcome.

        ``lease`` (seconds): the first renewal of a job is due a third of it
        after the master hears of the job.
        """
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                return
            if not chunk:
                return
            self.buffer += chunk
            *lines, self.buffer = self.buffer.split(b"\n")
            if not lines:
                continue
            # One decode for every whole line read (a busy child's dozens per pass).
            messages: list[PipeMessage] = json.loads(b"[" + b",".join(lines) + b"]")
            now = time.monotonic()
            for message in messages:
                outcome = self.apply(message, lease, now)
                if outcome is not None:
                    yield outcome

    def apply(self, message: PipeMessage, lease: float, now: float) -> AttemptOutcome | None:
        """Apply one message read at ``now`` (``time.monotonic()``); return the outcome word
        of an "end", else ``None``."""
        if message["e"] == Event.START:
            self.prefetched.pop(message["id"], None)
            self.running[message["id"]] = _child_job(message, lease, now)
        elif message["e"] == Event.PREFETCH:
            for job in message["jobs"]:
                self.prefetched[job["id"]] = _child_job(job, lease, now)
        elif message["e"] == Event.END:
            self.prefetched.pop(message["id"], None)
            self.running.pop(message["id"], None)
            self.cancelling.pop(message["id"], None)
            return AttemptOutcome(message["outcome"])
        return None


def _child_job(job: JobLine, lease: float, now: float) -> ChildJob:
    """The master's record of a job its child holds from ``now``: its first renewal is due
    a third of ``lease`` (seconds) later."""
    return ChildJob(
        queue=job["queue"],
        job_id=job["id"],
        token=int(job["token"]),
        name=job["name"],
        timeout=float(job["timeout"]),
        started=now,
        renew_at=now + lease / 3,
    )


class PipeHooks:
    """A child's side of the pipe (:class:`~django_rqueue.worker.hooks.WorkerHooks`): one JSON
    line per event (the typed messages of :mod:`~django_rqueue.worker.hooks`).

    "end" and "prefetch" lines wait in a buffer and go out with the next "start"
    (or at :meth:`flush`, when the worker goes idle or exits): one write,
    and one wake-up of the master, per job. "start" is never delayed: the
    master must know which job runs before its code does.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer: list[bytes] = []

    def _queue(self, message: PipeMessage) -> None:
        self.buffer.append(dumps(message).encode() + b"\n")  # 2 per job: the fast encoder

    def flush(self) -> None:
        """Write the buffered lines to the pipe, in one write."""
        if self.buffer:
            data, self.buffer = b"".join(self.buffer), []
            os.write(self.fd, data)

    def prefetched(self, queue: str, jobs: Sequence[Job[Any]]) -> None:
        message: PrefetchMessage = {
            "e": Event.PREFETCH,
            "jobs": [job_line(queue, job) for job in jobs],
        }
        self._queue(message)

    def started(self, queue: str, job: Job[Any]) -> None:
        message: StartMessage = {"e": Event.START, **job_line(queue, job)}
        self._queue(message)
        self.flush()

    def finished(self, job: Job[Any], outcome: AttemptOutcome) -> None:
        message: EndMessage = {"e": Event.END, "id": job.id, "outcome": outcome}
        self._queue(message)


def run_child(
    kind: ChildKind,
    fd: int,
    master: int,
    *,
    inherited: Iterable[int],
    settings: WorkerSettings,
    worker_id: str,
    cancel_fd: int | None = None,
) -> NoReturn:
    """Run in a child just forked by the master (pid ``master``) and ``os._exit`` at the end.

    The child leads its own process group (the master kills the group, so a
    job's own subprocesses go too, and kills what is left of it when the child
    exits), dies with the master (``PR_SET_PDEATHSIG``), closes the pipes of its
    siblings (``inherited``), ignores SIGTERM/SIGINT (the master decides; SIGUSR1
    stops it) and opens its own Redis connections. A worker child serves
    ``settings``, tells the master what it runs through ``fd`` (:class:`PipeHooks`) and
    reads its master's cancel requests from ``cancel_fd``
    (:mod:`~django_rqueue.worker.cancelling`); exit status 0 when it stopped cleanly, 1 when it
    crashed. A worker child sends ``worker_process_init`` before it serves and
    ``worker_process_shutdown`` (bounded: :mod:`~.lifecycle`) before it exits, crashed or not;
    the poller child sends them too (``role="poller"``), the second one unless it is killed.
    """
    code = 1
    initialized = False
    role = ProcessRole.POLLER if kind is ChildKind.POLLER else ProcessRole.CHILD
    try:
        os.setpgid(0, 0)
        set_pdeathsig()
        if os.getppid() != master:
            os._exit(1)
        for sibling in inherited:
            os.close(sibling)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        reset_after_fork()
        initialized = True
        process_started(role, worker_id)
        if kind is ChildKind.POLLER:
            poller = Poller(settings.queues)

            def stop(signum: int, frame: FrameType | None) -> None:
                poller.stop.set()

            signal.signal(signal.SIGUSR1, stop)
            poller.run()
            code = 0
        else:
            worker = Worker.supervised(
                settings, worker_id=worker_id, hooks=PipeHooks(fd), cancel_fd=cancel_fd
            )
            worker.install_child_signal_handlers()
            code = worker.run()
    except BaseException:
        logger.exception("worker child %d crashed", os.getpid())
    finally:
        if initialized:
            process_exiting(role, worker_id, code)
        logging.shutdown()
        os._exit(code)
