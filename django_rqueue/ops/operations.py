"""Staff actions: on one job, a selection, the whole failed store, or a queue (pause/resume).

Each action on one job is one atomic Lua call, so a job that changed state
since the page was rendered is reported (:class:`~.exceptions.JobStateError`)
and never clobbered. The retry of a node of a workflow is its workflow's
``retry_failed()`` (:mod:`~django_rqueue.workflows.control`): a node is never
re-run on its own. "Retry all" and "delete all" walk the failed store in
batches of :data:`BATCH` (one bounded Lua call each), so their memory does not
grow with the number of failed jobs. :func:`pause_queue` and
:func:`resume_queue` are what ``rqueue_pause``, ``rqueue_resume`` and the
admin overview's buttons call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from django.utils.translation import gettext_lazy

from ..conf import get_config
from ..engine import commands
from ..engine.calls import FailedBatchMode
from ..engine.connection import redis_errors, redis_time_ms
from ..engine.keys import queue_of
from ..engine.queue_ref import queue_ref
from ..engine.run import execute
from ..exceptions import JobStateError, WorkflowStateError
from ..job import Job, JobStatus, get_job
from ..workflows import control

if TYPE_CHECKING:
    from django.utils.functional import _StrOrPromise as StrOrPromise
else:
    StrOrPromise = str

#: Failed jobs handled per Lua call by :func:`process_failed`.
BATCH = 500


class JobAction(StrEnum):
    """A staff action on one job (:func:`perform`), with its :attr:`verb` and :attr:`states`."""

    RETRY = "retry"
    RUN_NOW = "run_now"
    #: A running job is asked to stop (``Job.cancel()``: its worker ends it cancelled).
    CANCEL = "cancel"
    DELETE = "delete"

    @property
    def verb(self) -> StrOrPromise:
        """What became of the job, translatable ("retried", "queued to run now", ...)."""
        return _SPECS[self].verb

    @property
    def states(self) -> tuple[JobStatus, ...]:
        """The states of the jobs it applies to."""
        return _SPECS[self].states

    def apply(self, job: Job[Any]) -> None:
        """Apply it to ``job`` through its :class:`~django_rqueue.job.Job` method.

        Raises:
            JobStateError: the job is in a state the action does not apply to.
        """
        _SPECS[self].method(job)


@dataclass(frozen=True)
class _Spec:
    verb: StrOrPromise
    states: tuple[JobStatus, ...]
    #: The :class:`~django_rqueue.job.Job` method that performs it.
    method: Callable[[Job[Any]], None]


_SPECS: dict[JobAction, _Spec] = {
    JobAction.RETRY: _Spec(gettext_lazy("retried"), (JobStatus.FAILED,), Job.retry),
    JobAction.RUN_NOW: _Spec(
        gettext_lazy("queued to run now"), (JobStatus.SCHEDULED,), Job.run_now
    ),
    JobAction.CANCEL: _Spec(
        gettext_lazy("cancelled"),
        (
            JobStatus.WAITING,
            JobStatus.SCHEDULED,
            JobStatus.QUEUED,
            JobStatus.RUNNING,
            JobStatus.FAILED,
        ),
        Job.cancel,
    ),
    JobAction.DELETE: _Spec(
        gettext_lazy("deleted"),
        (
            JobStatus.WAITING,
            JobStatus.SCHEDULED,
            JobStatus.QUEUED,
            JobStatus.FAILED,
            JobStatus.SUCCEEDED,
            JobStatus.CANCELLED,
        ),
        Job.delete,
    ),
}

#: Action name -> (verb for messages, states it applies to): :class:`JobAction` as a mapping.
ACTIONS: dict[str, tuple[StrOrPromise, tuple[str, ...]]] = {
    action.value: (action.verb, tuple(state.value for state in action.states))
    for action in JobAction
}


def perform(job_id: str, action: str) -> str | None:
    """Apply ``action`` (a :class:`JobAction`, or its value) to one job.

    A waiting job (one that waits for its inputs) can be cancelled or deleted: its
    dependents hear of it as of any cancel. The retry of a failed node of a workflow retries
    its workflow's failed nodes (``Workflow.retry_failed()``: the nodes they cancelled run
    again too); the returned message says so. Otherwise returns ``None``.

    Raises:
        JobStateError: the job is missing or in a state the action does not apply to; for
            a node of a workflow, also when its workflow cannot be retried (still running,
            records expired: the message says why).
        ValueError: unknown action, or an id of no declared queue.
    """
    queue = queue_of(job_id)
    if queue is None or queue not in get_config().queues:
        raise ValueError(f"{job_id!r} is not a job id of a declared queue")
    try:
        what = JobAction(action)
    except ValueError:
        raise ValueError(f"unknown action {action!r}") from None
    job = get_job(job_id)
    if job is None:
        raise JobStateError(f"job {job_id} is missing", None)
    if what is JobAction.RETRY and job.workflow_id and job.status is JobStatus.FAILED:
        return _retry_workflow(job)
    what.apply(job)
    return None


def _retry_workflow(job: Job[Any]) -> str:
    workflow_id = job.workflow_id or ""
    try:
        plan = control.retry_failed(workflow_id)
    except WorkflowStateError as exc:
        raise JobStateError(
            f"job {job.id} is part of workflow {workflow_id}, whose failed nodes cannot be "
            f"retried: {exc}",
            exc.state or None,
        ) from exc
    return (
        f"job {job.id} is part of workflow {workflow_id}: its workflow's "
        f"{len(plan.requeues)} failed node(s) were retried with retry_failed(), and "
        f"{len(plan.arms) - 1} node(s) they had cancelled will run after them"
    )


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
    ref = queue_ref(queue)
    keys, client = ref.keys, ref.client()
    upto = redis_time_ms(client)
    result = BulkResult()
    while True:
        command = commands.failed_batch(
            keys, mode=mode, limit=batch, offset=result.skipped, upto_ms=upto, name=name
        )
        done, skipped, stale, scanned = execute(client, command)
        result.done += done
        result.skipped += skipped
        result.stale += stale
        result.batches += 1
        if progress is not None:
            progress(result)
        if scanned < batch:
            return result


@dataclass
class EmptyResult:
    """Totals of :func:`empty_queue`."""

    deleted: int = 0
    #: Ids left in the queue's lists by a job that had already gone (dropped).
    stale: int = 0
    batches: int = 0


def empty_queue(
    queue: str,
    *,
    batch: int = BATCH,
    limit: int | None = None,
    progress: Callable[[EmptyResult], None] | None = None,
) -> EmptyResult:
    """Delete the queued jobs of ``queue``, ``batch`` per Lua call (so memory and each
    call stay bounded), until none is left or ``limit`` jobs were deleted.

    Scheduled jobs (retries included), running and failed jobs are left alone: a
    scheduled job is queued when it is due, a running one finishes as usual.
    ``limit`` (default: the number of queued jobs when the call starts) keeps a
    queue that producers fill as fast as it is emptied from holding the caller
    forever. ``progress`` is called after each batch.

    Raises:
        ValueError: ``queue`` is not declared.
        RedisUnavailable: Redis cannot be reached (the batches done so far stay done).
    """
    ref = queue_ref(queue)
    keys, client = ref.keys, ref.client()
    if limit is None:
        with redis_errors(client):
            limit = int(client.hget(keys.stats, "queued") or 0)
    result = EmptyResult()
    while result.deleted + result.stale < limit:
        size = min(batch, limit - result.deleted - result.stale)
        deleted, stale, more = execute(client, commands.empty_queue(keys, size))
        result.deleted += deleted
        result.stale += stale
        result.batches += 1
        if progress is not None:
            progress(result)
        if not more:
            break
    return result


def pause_queue(queue: str) -> bool:
    """Pause ``queue``: it keeps accepting jobs and hands out none until resumed.

    Enforced by the reserve scripts, so every worker obeys from its next
    reservation on; running jobs finish and report as usual; the poller still
    queues due jobs there (they wait); idle workers block as on an empty queue.
    Returns whether the queue was running (``False``: it was already paused).

    Raises:
        ValueError: ``queue`` is not declared.
        RedisUnavailable: Redis cannot be reached (nothing changed).
    """
    ref = queue_ref(queue)
    return execute(ref.client(), commands.pause(ref.keys))


def resume_queue(queue: str) -> bool:
    """Resume a paused ``queue``; its idle workers are woken at once (one token per queued
    job, at most 64). Returns whether it was paused (``False``: nothing changed).

    Raises:
        ValueError: ``queue`` is not declared.
        RedisUnavailable: Redis cannot be reached (nothing changed).
    """
    ref = queue_ref(queue)
    return execute(ref.client(), commands.resume(ref.keys))
