"""Whole-workflow operations on a workflow that exists: :func:`cancel` and :func:`retry_failed`.

Each changes the workflow's record on its home queue first
(:mod:`~django_rqueue.engine.workflow_record`: the check of the workflow's state and the
point from which the operation is complete), then its nodes, one queue at a time, with
:mod:`~django_rqueue.engine.workflow_calls` (batches of :data:`BATCH` nodes). Every step
is idempotent, so an operation interrupted half-way (a killed client, Redis unreachable)
is completed by calling it again. ``Workflow.cancel()`` and ``Workflow.retry_failed()``
(:mod:`~django_rqueue.workflows.handle`) call them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Final

from ..engine import run, workflow_calls
from ..engine import workflow_record as record
from ..engine.connection import as_text, redis_errors
from ..engine.fields import WorkflowFields
from ..engine.keys import queue_of
from ..engine.queue_ref import QueueRef, queue_ref
from ..engine.workflow_calls import Cancelled
from ..engine.workflow_record import FINAL, RecordReply, RecordState
from ..exceptions import WorkflowStateError

#: Most nodes of one ``wf_cancel.lua`` / ``wf_rearm.lua`` call.
BATCH: Final = 500


def cancel(workflow_id: str) -> Cancelled:
    """Cancel the workflow ``workflow_id``: its record becomes ``cancelling``, then each of
    its nodes that has not ended ends ``cancelled`` with ``cancel_reason``
    ``workflow_cancelled`` (a running node is asked to stop: its worker's master ends it
    so, as for ``Job.cancel()``). The finisher is not cancelled: it runs once every node
    has ended and closes the workflow ``cancelled`` (its ``on_complete`` runs, the signal is
    sent). Calling it again (after an interruption, or twice) completes what is left.

    Returns the totals of the node calls: nodes cancelled now, running nodes asked to stop.

    Raises:
        WorkflowStateError: the workflow has finished (``.state`` tells) or its record is
            gone (``.state`` is ``None``).
        ValueError: ``workflow_id`` is not an id of a declared queue.
        RedisUnavailable: Redis cannot be reached (what was done stays done).
    """
    home = _home(workflow_id)
    reply = run.execute(home.client(), record.cancel(home.keys, workflow_id))
    _check(reply, workflow_id, "cancel")
    cancelled = requested = 0
    # Sinks first (declared order is topological): a node is cancelled before its inputs
    # are, so that their cancels find it ended and each node records this reason.
    for ref, ids in _by_queue(_spec_nodes(home, workflow_id)[::-1]):
        ttl = max(1, ref.config.result_ttl)
        commands = (workflow_calls.wf_cancel(ref.keys, batch, ttl) for batch in _batches(ids))
        for got in run.execute_pipelined(ref.client(), commands):
            cancelled += got.cancelled
            requested += got.requested
    return Cancelled(cancelled, requested)


# -- shared ------------------------------------------------------------------------------


def _home(workflow_id: str) -> QueueRef:
    queue = queue_of(workflow_id)
    if queue is None:
        raise ValueError(f"{workflow_id!r} is not a workflow id")
    return queue_ref(queue)


def _shown(state: RecordState | None) -> str | None:
    """A record state as ``WorkflowState`` shows it (being created, cancelled or re-armed
    is running)."""
    if state is None:
        return None
    return state.value if state in FINAL else "running"


def _check(reply: RecordReply, workflow_id: str, action: str) -> None:
    if reply.outcome == "gone":
        raise WorkflowStateError(f"workflow {workflow_id} no longer exists", workflow_id, None)
    if not reply.done:
        shown = _shown(reply.state)
        raise WorkflowStateError(
            f"cannot {action} workflow {workflow_id}: it is {shown}", workflow_id, shown
        )


def _spec_nodes(home: QueueRef, workflow_id: str) -> list[str]:
    """The node ids the record's ``spec`` lists, in declared order (``[]`` when gone)."""
    client = home.client()
    with redis_errors(client):
        spec = client.hget(home.keys.workflow(workflow_id), WorkflowFields.SPEC)
    if spec is None:
        return []
    return [as_text(node[0]) for node in json.loads(spec)["nodes"]]


def _by_queue(node_ids: Sequence[str]) -> Iterator[tuple[QueueRef, list[str]]]:
    """``node_ids`` grouped by queue (first appearance order), with each queue's handle."""
    grouped: dict[str, list[str]] = {}
    for node_id in node_ids:
        grouped.setdefault(queue_of(node_id) or "", []).append(node_id)
    for queue, ids in grouped.items():
        yield queue_ref(queue), ids


def _batches[T](items: Sequence[T], size: int = BATCH) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
