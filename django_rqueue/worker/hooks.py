"""The contract between a supervised worker child and its master.

The worker side calls a :class:`WorkerHooks` (a supervised child's is
:class:`~django_rqueue.master.children.PipeHooks`, which writes each call as one JSON line on the
pipe to its master); the master reads those lines back
(:meth:`~django_rqueue.master.children.Child.apply`). The lines are the typed messages below, keyed
by :class:`Event`; an "end" carries the :class:`AttemptOutcome` word.
:class:`StopRequested` is how a child's stop handler leaves an idle wait.

This module imports nothing of the worker's, so the loop, the async runner, the
prefetched store and the pipe all depend on it and not on one another.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any, Literal, Protocol, TypedDict

from ..job import Job


class AttemptOutcome(enum.StrEnum):
    """How an attempt ended once reported (the word in the log line and on the pipe)."""

    SUCCEEDED = "succeeded"
    #: Failed with attempts left: scheduled again after its backoff.
    RETRYING = "retrying"
    #: Failed for good: in the failed store.
    FAILED = "failed"
    #: The report was refused (stale fencing token) or could not be delivered in time.
    DISCARDED = "discarded"
    #: Reserved ahead and handed back unstarted (no attempt spent).
    RELEASED = "released"
    #: Stopped at the request of ``Job.cancel()`` (:mod:`~.cancelling`): ``cancelled``, not retried.
    CANCELLED = "cancelled"


class StopRequested(Exception):  # noqa: N818 - a control-flow signal, not an error
    """Raised by a supervised child's stop handler to leave an idle wait at once."""


class WorkerHooks(Protocol):
    """Callbacks a supervisor gives its children (see :mod:`django_rqueue.master.supervisor`)."""

    def prefetched(self, queue: str, jobs: Sequence[Job[Any]]) -> None:
        """Jobs were reserved ahead (prefetched): renew their leases until they start or end."""

    def started(self, queue: str, job: Job[Any]) -> None:
        """A job is about to run (reserved just now, or :meth:`prefetched` before)."""

    def finished(self, job: Job[Any], outcome: AttemptOutcome) -> None:
        """The job's outcome was reported to Redis, discarded, or ``released`` (handed back)."""

    def flush(self) -> None:
        """Deliver what was buffered (the worker goes idle or exits)."""


class Event(enum.StrEnum):
    """The ``"e"`` of a pipe line: what happened to a child's job(s)."""

    #: Jobs reserved ahead, not started (:class:`PrefetchMessage`).
    PREFETCH = "prefetch"
    #: A job is about to run (:class:`StartMessage`).
    START = "start"
    #: A job's outcome was reported, or it was handed back (:class:`EndMessage`).
    END = "end"


class JobLine(TypedDict):
    """What the master keeps of a job it hears of: enough to renew its lease and time it."""

    queue: str
    id: str
    #: The job's fencing token.
    token: int
    name: str
    #: Seconds (the job's own soft timeout; 0 = none).
    timeout: float


class PrefetchMessage(TypedDict):
    """``{"e": "prefetch", "jobs": [JobLine, ...]}``."""

    e: Literal[Event.PREFETCH]
    jobs: list[JobLine]


class StartMessage(JobLine):
    """``{"e": "start", **JobLine}``."""

    e: Literal[Event.START]


class EndMessage(TypedDict):
    """``{"e": "end", "id": <job id>, "outcome": <AttemptOutcome word>}``."""

    e: Literal[Event.END]
    id: str
    outcome: AttemptOutcome


#: One line on the pipe, child to master.
PipeMessage = PrefetchMessage | StartMessage | EndMessage


def job_line(queue: str, job: Job[Any]) -> JobLine:
    """The :class:`JobLine` of ``job`` of ``queue``."""
    return {
        "queue": queue,
        "id": job.id,
        "token": job.token,
        "name": job.name,
        "timeout": job.timeout,
    }
