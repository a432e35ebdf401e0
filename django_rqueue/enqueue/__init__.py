"""The enqueue path: from ``.delay()`` / ``.delay_many()`` / ``adelay()`` to a job in Redis.

:func:`submit` and :func:`submit_many` resolve a job function's options once
per call (:class:`~django_rqueue.enqueue.plan.Plan`), validate and encode
every call's arguments before anything is written, and then either run the
jobs inline (``RQUEUE["EAGER"]``), write them now
(:mod:`~django_rqueue.enqueue.write`), or, inside ``transaction.atomic()``,
hand them to ``transaction.on_commit`` so that they are written when the
outermost transaction commits and not at all on a rollback
(:mod:`~django_rqueue.enqueue.commit`).

:func:`asubmit` is the path of ``adelay()``, for async code: the same
validation, then the write on redis-py's asyncio client. Whether the call
waits for a commit is asked in ``sync_to_async``'s thread, where the caller's
transaction (if any) lives: Django's transactions are per thread and async
code cannot open one, so from a plain coroutine it writes at once.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async

from ..conf import get_config
from ..execution import arun_eager, run_eager
from ..headers import InvalidHeaders
from ..job import Job
from ..options import JobOptions
from . import commit

# Re-exported (``X as X``): the names of django_rqueue.enqueue from before it was a package
# (a constant is read where it is defined: patch ``enqueue.write.ENQUEUE_PATIENCE``).
from .commit import HOLDING as HOLDING
from .plan import Plan as Plan
from .plan import Submission as Submission
from .write import ENQUEUE_PATIENCE as ENQUEUE_PATIENCE
from .write import ENQUEUE_RETRY as ENQUEUE_RETRY
from .write import WROTE as WROTE
from .write import BatchSubmission as BatchSubmission
from .write import awrite_one, write_one
from .write import replica_wait as replica_wait

if TYPE_CHECKING:
    from ..types import JobSpec

#: Set by ``django_rqueue.testing.capture_jobs()``: while set (in this context), every
#: validated submission is handed to it instead of being written or run.
capture: contextvars.ContextVar[Callable[[Submission], Job[Any]] | None] = contextvars.ContextVar(
    "django_rqueue_capture", default=None
)


def submit(
    job_function: JobSpec,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    options: JobOptions | None = None,
    fields: Mapping[str, str] | None = None,
    overlap: Callable[[], object] | None = None,
) -> Job[Any]:
    """Enqueue one call of ``job_function`` (see :meth:`~.BaseJobFunction.delay`).

    ``options``: this call's options instead of ``job_function.options`` for
    its :class:`Plan` (the ``django.tasks`` backend passes a task's queue,
    priority and run-after this way, so that the job function, the signals'
    sender, stays one object); whether the write waits for a commit still
    follows ``job_function.options.on_commit``. ``fields``: extra job-hash
    fields written with the job. ``overlap``: called at most once, while Redis
    runs a write made now (not when the call is captured, run in EAGER mode,
    deferred to a commit, or waits for replicas): work that does not need the reply.
    """
    submission, captured = _prepare(job_function, args, kwargs, options, fields)
    if captured is not None:
        return captured
    if get_config().eager:
        return run_eager(job_function, submission.job)
    deferred = commit.defer_until_commit(submission)
    if deferred is not None:
        return deferred
    submission.overlap = overlap
    return write_one(submission)


async def asubmit(
    job_function: JobSpec, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> Job[Any]:
    """:func:`submit` for async code (see :meth:`~.BaseJobFunction.adelay`)."""
    submission, captured = _prepare(job_function, args, kwargs)
    if captured is not None:
        return captured
    if get_config().eager:
        return await arun_eager(job_function, submission.job)
    if job_function.options.on_commit is not False:
        deferred = await sync_to_async(commit.defer_until_commit)(submission)
        if deferred is not None:
            return deferred
    return await awrite_one(submission)


def _prepare(
    job_function: JobSpec,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    options: JobOptions | None = None,
    fields: Mapping[str, str] | None = None,
) -> tuple[Submission, Job[Any] | None]:
    """Validate and encode one call; with it, the Job ``capture_jobs()`` made of it (if on).

    ``options`` and ``fields``: as for :func:`submit`.
    """
    submission = Plan.of(job_function, get_config(), options).submission(args, kwargs)
    if fields:
        submission.extra = fields
    captured = capture.get()
    return submission, None if captured is None else captured(submission)


def submit_dependent(
    job_function: JobSpec, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> Job[Any]:
    """Enqueue one call of a job function with ``using(depends_on=...)``: a job that waits
    for others (:func:`.dependent.submit`, which says what it raises)."""
    from . import dependent  # only with depends_on

    return dependent.submit(job_function, args, kwargs, capture.get())


async def asubmit_dependent(
    job_function: JobSpec, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> Job[Any]:
    """:func:`submit_dependent` for async code."""
    from . import dependent

    return await dependent.asubmit(job_function, args, kwargs, capture.get())


def submit_many(
    job_function: JobSpec,
    calls: Iterable[tuple[Sequence[Any], Mapping[str, Any]]],
    batch_size: int,
) -> list[Job[Any]]:
    """Enqueue one run per ``(args, kwargs)`` pair (see :meth:`~.BaseJobFunction.delay_many`)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size!r}")
    config = get_config()
    plan = Plan.of(job_function, config)
    if plan.job_id is not None:
        raise ValueError(
            "using(job_id=...) names one job: enqueue it with .delay(), not delay_many"
        )
    submissions: list[Submission] = []
    for index, call in enumerate(calls):
        args, kwargs = call_pair(index, call)
        try:
            submissions.append(plan.submission(args, kwargs))
        except TypeError as exc:
            raise TypeError(f"call {index}: {exc}") from exc
        except InvalidHeaders as exc:
            raise InvalidHeaders(f"call {index}: {exc}") from exc
        except ValueError as exc:
            raise ValueError(f"call {index}: {exc}") from exc
    captured = capture.get()
    if captured is not None:
        return [captured(s) for s in submissions]
    if config.eager:
        return [run_eager(job_function, s.job) for s in submissions]
    batch = BatchSubmission(job_function, submissions, batch_size)
    if commit.deferred(job_function):
        batch.resolve_pending(commit.pending_holder)
        if batch.to_write:
            commit.defer(batch, batch.to_write)
        return batch.jobs
    return batch()


def call_pair(index: int, call: object) -> tuple[Sequence[Any], Mapping[str, Any]]:
    """Check that ``call`` is an ``(args, kwargs)`` pair (``TypeError`` naming ``index``)."""
    if isinstance(call, tuple | list) and len(call) == 2:
        args, kwargs = call
        plain = type(args) in (tuple, list) and type(kwargs) is dict
        if plain and all(type(k) is str for k in kwargs):
            return args, kwargs  # the common case, without the ABC checks below
        if (
            isinstance(args, Sequence)
            and not isinstance(args, str | bytes)
            and isinstance(kwargs, Mapping)
            and all(isinstance(k, str) for k in kwargs)
        ):
            return args, kwargs
    raise TypeError(
        f"call {index}: expected an (args, kwargs) pair such as ((1, 2), {{}}), got {call!r:.80}"
    )
