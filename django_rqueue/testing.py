"""Helpers for testing code that enqueues jobs: :func:`capture_jobs`.

Inside ``with capture_jobs() as captured:``, ``.delay()`` and
``.delay_many()`` (``using(...)`` variants included) validate and resolve the
call as usual (a bad argument or an undeclared queue still raises) but, instead
of writing to Redis or running the job (even with ``RQUEUE["EAGER"]``), append a
:class:`CapturedJob` to ``captured`` and return its :class:`~django_rqueue.Job`
(status ``queued`` or ``scheduled``, a real id). Nothing touches Redis. Calls
are captured when made, inside ``transaction.atomic()`` too (``options["on_commit"]``
tells whether a real enqueue would wait for the commit); unique keys are recorded,
not enforced.

The capture is held in a :mod:`contextvars` variable: a nested block captures
into its own list (the outer one does not see those calls), asyncio tasks
started inside the block are captured, and threads started inside it are not
(they begin with an empty context and enqueue for real).
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from . import enqueue
from .execution import run_eager
from .job import Job

if TYPE_CHECKING:
    from .types import JobSpec

__all__ = ["CapturedJob", "CapturedJobs", "capture_jobs"]


@dataclasses.dataclass
class CapturedJob:
    """One captured ``.delay()`` call (or one call of a ``.delay_many()``).

    ``options`` are the resolved options: ``queue``, ``priority``, ``group``,
    ``max_attempts``, ``timeout`` (s), ``result_ttl`` (s), ``unique_key`` (the
    string, a callable key already applied; ``""`` for none), ``unique_ttl`` (s),
    ``delay`` (s, or ``None``), ``run_at`` (aware datetime, or ``None``),
    ``expires`` (s from the enqueue, an aware datetime, or ``None``) and
    ``on_commit``.
    """

    job_function: JobSpec
    #: The Job ``.delay()`` returned; :meth:`run` updates it in place.
    job: Job[Any]
    options: dict[str, Any]
    ran: bool = False

    @property
    def name(self) -> str:
        return self.job.name

    @property
    def args(self) -> list[Any]:
        return self.job.args

    @property
    def kwargs(self) -> dict[str, Any]:
        return self.job.kwargs

    def run(self) -> Job[Any]:
        """Run the job inline as EAGER does (every attempt, signals) unless it already ran;
        return the finished Job (the same object ``.delay()`` returned)."""
        if not self.ran:
            self.ran = True
            run_eager(self.job_function, self.job)
        return self.job


class CapturedJobs(list[CapturedJob]):
    """The calls captured by one :func:`capture_jobs` block, in call order."""

    def of(self, job_function: JobSpec | str) -> list[CapturedJob]:
        """The captured calls of one job (a ``@job`` function or its name)."""
        name = job_function if isinstance(job_function, str) else job_function.name
        return [c for c in self if c.name == name]

    def run_all(self) -> list[Job[Any]]:
        """Run every captured job not run yet, in order, as EAGER does; return their Jobs.

        Called inside the block, jobs that these jobs enqueue are captured
        and run too, after them. With ``RQUEUE["EAGER_PROPAGATE"]`` the first
        failure's exception propagates.
        """
        done: list[Job[Any]] = []
        index = 0
        while index < len(self):  # the list may grow while jobs run
            captured = self[index]
            index += 1
            if not captured.ran:
                done.append(captured.run())
        return done


@contextmanager
def capture_jobs() -> Iterator[CapturedJobs]:
    """Capture the jobs enqueued inside the block instead of sending them (see module doc)."""
    captured = CapturedJobs()

    def record(submission: enqueue.Submission) -> Job[Any]:
        job = submission.job
        now = datetime.datetime.now(datetime.UTC)
        delay = submission.plan.delay_ms / 1000 if submission.plan.delay_ms > 0 else None
        job.enqueued_at = now
        if job.run_at is None:
            job.run_at = now + datetime.timedelta(seconds=delay or 0)
        options = {
            "queue": job.queue,
            "priority": job.priority,
            "group": job.group,
            "max_attempts": job.max_attempts,
            "timeout": job.timeout,
            "result_ttl": job.result_ttl,
            "unique_key": job.unique_key,
            "unique_ttl": submission.plan.unique_ttl,
            "delay": delay,
            "run_at": submission.job.run_at if submission.plan.run_at_ms >= 0 else None,
            # Seconds from the enqueue, or an aware datetime, as given (None: never).
            "expires": (
                submission.plan.expires_in_ms / 1000
                if submission.plan.expires_in_ms >= 0
                else submission.job.expires_at
            ),
            "on_commit": submission.plan.job_function.options.on_commit is not False,
        }
        captured.append(CapturedJob(submission.plan.job_function, job, options))
        return job

    token = enqueue.capture.set(record)
    try:
        yield captured
    finally:
        enqueue.capture.reset(token)
