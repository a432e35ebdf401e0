"""Job actions for staff: one job, a selection, or the whole failed store.

Each action on one job is one atomic Lua call, so a job that changed state
since the page was rendered is reported (:class:`~.exceptions.JobStateError`)
and never clobbered. "Retry all" and "delete all" walk the failed store in
batches of :data:`BATCH` (one bounded Lua call each), so their memory does not
grow with the number of failed jobs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .conf import get_config
from .engine import transitions
from .engine.calls import FailedBatchMode
from .engine.connection import get_client, redis_time_ms
from .engine.keys import QueueKeys, queue_of
from .exceptions import JobStateError
from .job import Job, get_job

#: Failed jobs handled per Lua call by :func:`process_failed`.
BATCH = 500

#: Action name -> (verb for messages, states it applies to).
ACTIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "retry": ("retried", ("failed",)),
    "run_now": ("queued to run now", ("scheduled",)),
    "cancel": ("cancelled", ("scheduled", "queued", "failed")),
    "delete": ("deleted", ("scheduled", "queued", "failed", "succeeded", "cancelled")),
}


#: Action name -> the :class:`~.job.Job` method that performs it.
_METHODS: dict[str, Callable[[Job[Any]], None]] = {
    "retry": Job.retry,
    "run_now": Job.run_now,
    "cancel": Job.cancel,
    "delete": Job.delete,
}


def perform(job_id: str, action: str) -> None:
    """Apply ``action`` (a key of :data:`ACTIONS`) to one job, through its :class:`~.job.Job`.

    Raises:
        JobStateError: the job is missing or in a state the action does not apply to.
        ValueError: unknown action, or an id of no declared queue.
    """
    queue = queue_of(job_id)
    if queue is None or queue not in get_config().queues:
        raise ValueError(f"{job_id!r} is not a job id of a declared queue")
    method = _METHODS.get(action)
    if method is None:
        raise ValueError(f"unknown action {action!r}")
    job = get_job(job_id)
    if job is None:
        raise JobStateError(f"job {job_id} is missing", None)
    method(job)


@dataclass
class ActionReport:
    """What a bulk action did: ids done, and ids refused with the reason."""

    done: list[str] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)


def perform_many(job_ids: Iterable[str], action: str) -> ActionReport:
    """Apply ``action`` to each job in turn (one Lua call each); never stops early."""
    outcome = ActionReport()
    for job_id in job_ids:
        try:
            perform(job_id, action)
        except JobStateError as exc:
            outcome.refused.append((job_id, f"it is {exc.state or 'gone'}"))
        except ValueError as exc:
            outcome.refused.append((job_id, str(exc)))
        else:
            outcome.done.append(job_id)
    return outcome


@dataclass
class BulkResult:
    """Totals of :func:`process_failed`."""

    done: int = 0
    #: Failed jobs left alone because their name did not match.
    skipped: int = 0
    #: Ids found in the failed store whose record was gone or not failed (dropped).
    stale: int = 0
    batches: int = 0


def process_failed(
    queue: str,
    mode: FailedBatchMode,
    *,
    name: str = "",
    batch: int = BATCH,
    progress: Callable[[BulkResult], None] | None = None,
) -> BulkResult:
    """Retry (``mode="retry"``) or delete (``"delete"``) every failed job of ``queue``.

    Only jobs that failed before the call started are touched, so a retried
    job that fails again at once is not retried twice. ``name`` limits it to
    one job name. ``progress`` is called after each batch.
    """
    get_config().queue(queue)
    keys = QueueKeys.of(get_config().key_prefix, queue)
    client = get_client(queue)
    upto = redis_time_ms(client)
    result = BulkResult()
    while True:
        done, skipped, stale, scanned = transitions.failed_batch(
            client, keys, mode=mode, limit=batch, offset=result.skipped, upto_ms=upto, name=name
        )
        result.done += done
        result.skipped += skipped
        result.stale += stale
        result.batches += 1
        if progress is not None:
            progress(result)
        if scanned < batch:
            return result
