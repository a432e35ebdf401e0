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
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..engine import run, workflow_calls
from ..engine import workflow_record as record
from ..engine.connection import as_text, redis_errors
from ..engine.fields import JobFields, WorkflowFields
from ..engine.keys import finisher_id, queue_of
from ..engine.queue_ref import QueueRef, queue_ref
from ..engine.workflow_calls import Cancelled, Rearm
from ..engine.workflow_record import FINAL, RecordReply, RecordState
from ..exceptions import WorkflowStateError

#: Most nodes of one ``wf_cancel.lua`` / ``wf_rearm.lua`` call.
BATCH: Final = 500
#: Milliseconds a ``retry_failed()`` may stall between two steps before the pollers may
#: complete it from the plan stored in the record (the record's place in ``wfopen``).
REOPEN_GRACE_MS: Final = 60_000


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


@dataclass(frozen=True, slots=True)
class RetryPlan:
    """What ``retry_failed()`` does, decided once and stored in the record (``plan``) so that
    a replay does the same: the same tombstones, with the tokens read when it was planned."""

    #: A re-armed node's dependency deadline, ms from the re-arm (-1: none).
    deadline_ms: int
    #: ``arm`` steps in reverse topological order: the finisher, then the sinks first.
    arms: tuple[Rearm, ...]
    #: ``requeue`` steps: the failed nodes, in declared order.
    requeues: tuple[Rearm, ...]

    def to_json(self) -> str:
        """The plan as the record stores it: ``{"d": deadline ms, "a": [[id, token, [[k, T],
        ...]], ...], "r": [[id, token], ...]}``."""
        return json.dumps(
            {
                "d": self.deadline_ms,
                "a": [[a.job_id, a.token, [list(t) for t in a.tombstones]] for a in self.arms],
                "r": [[r.job_id, r.token] for r in self.requeues],
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, raw: str | bytes) -> RetryPlan:
        """Read back :meth:`to_json`. Raises ``ValueError`` (``KeyError``, ``TypeError``)
        on anything else."""
        data = json.loads(raw)
        arms = tuple(
            Rearm("arm", str(i), int(t), tuple((int(k), int(v)) for k, v in stones))
            for i, t, stones in data["a"]
        )
        requeues = tuple(Rearm("requeue", str(i), int(t)) for i, t in data["r"])
        return cls(int(data["d"]), arms, requeues)


def retry_failed(workflow_id: str) -> RetryPlan:
    """Re-run the failed nodes of the workflow ``workflow_id``, which ended ``failed``.

    The plan: the failed nodes, and the closure downstream of them through nodes
    ``cancelled`` with ``cancel_reason`` ``dependency_failed`` (a node that succeeded is
    never re-run and stops the closure, as do nodes cancelled otherwise), plus the
    finisher. A failed node downstream of another one (policy ``"run"``) is re-armed,
    not queued: it runs again with the new outcomes of its inputs. The record becomes
    ``reopening`` with the plan stored, then, with ``wf_rearm.lua``: the finisher and the
    nodes to re-arm are ``waiting`` again (the arrivals of the inputs that run again
    replaced by tombstones ``r<token>``, so that a late outcome of their old run changes
    nothing), sinks first; the other failed nodes are queued again; the record is
    ``running`` again. Called on a workflow left ``reopening`` (an
    interrupted call), it completes the stored plan.

    Returns the plan it applied.

    Raises:
        WorkflowStateError: the workflow is running, succeeded or was cancelled, its record
            is gone, it has no failed node, records it needs have expired (the message
            names them), or the plan of an interrupted retry is unreadable.
        ValueError: ``workflow_id`` is not an id of a declared queue.
        RedisUnavailable: Redis cannot be reached (what was done stays done; call again).
    """
    home = _home(workflow_id)
    client = home.client()
    with redis_errors(client):
        raw = client.hgetall(home.keys.workflow(workflow_id))
    fields = {as_text(k): v for k, v in raw.items()}
    if not fields:
        raise WorkflowStateError(f"workflow {workflow_id} no longer exists", workflow_id, None)
    st = as_text(fields.get(WorkflowFields.STATE))
    if st == RecordState.REOPENING:
        try:
            plan = RetryPlan.from_json(fields[WorkflowFields.PLAN])
        except (KeyError, TypeError, ValueError) as exc:
            raise WorkflowStateError(
                f"workflow {workflow_id} is being retried, and its stored plan is unreadable "
                f"({exc!r})",
                workflow_id,
                "running",
            ) from exc
    else:
        if st != RecordState.FAILED:
            shown = _shown(RecordState(st)) if st in set(RecordState) else st
            raise WorkflowStateError(
                f"cannot retry the failed nodes of workflow {workflow_id}: it is {shown}"
                + (" (still running)" if shown == "running" else ""),
                workflow_id,
                shown,
            )
        plan = plan_retry(workflow_id, fields)
        reply = run.execute(
            client, record.reopen(home.keys, workflow_id, REOPEN_GRACE_MS, plan.to_json())
        )
        _check(reply, workflow_id, "retry the failed nodes of")
    _apply(plan)
    run.execute(client, record.reopened(home.keys, workflow_id))
    return plan


def plan_retry(workflow_id: str, fields: Mapping[str, Any]) -> RetryPlan:
    """The :class:`RetryPlan` of a workflow that ended ``failed``, whose record's fields
    (``HGETALL``, names as text) are ``fields``: reads its nodes and its finisher.

    Raises:
        WorkflowStateError: no failed node, a needed record expired, or the finisher is in
            a state it cannot be re-armed from.
    """
    spec = json.loads(fields[WorkflowFields.SPEC])
    ids: list[str] = [str(node[0]) for node in spec["nodes"]]
    finisher = finisher_id(workflow_id)
    read = _read_nodes([*ids, finisher])
    fstate = read.get(finisher)
    if fstate is None or fstate[0] not in ("succeeded", "failed"):
        raise WorkflowStateError(
            f"workflow {workflow_id}: its finisher is {fstate[0] if fstate else 'expired'}, "
            "it cannot be re-armed",
            workflow_id,
            "failed",
        )
    failed = [i for i, node_id in enumerate(ids) if (read.get(node_id) or ("",))[0] == "failed"]
    if not failed:
        raise WorkflowStateError(
            f"workflow {workflow_id} has no failed node to re-run", workflow_id, "failed"
        )
    dependents: dict[int, list[int]] = {}
    for source, target in spec["edges"]:
        dependents.setdefault(int(source), []).append(int(target))
    chosen, rearmed, expired = set(failed), set[int](), []
    todo = list(failed)
    while todo:
        for target in dependents.get(todo.pop(), ()):
            if target in chosen:
                continue
            got = read.get(ids[target])
            if got is None:
                expired.append(ids[target])
            elif got[0] == "cancelled" and got[1] == "dependency_failed":
                chosen.add(target)
                rearmed.add(target)
                todo.append(target)
    if expired:
        raise WorkflowStateError(
            f"workflow {workflow_id}: the records of {', '.join(sorted(set(expired)))} "
            "have expired",
            workflow_id,
            "failed",
        )
    again = {ids[i] for i in chosen}
    inputs_of = {i: read[ids[i]][3] for i in chosen}
    # A failed node with an input that runs again (a "run" node fed the failure) waits for
    # it: armed like the nodes the failure cancelled, not queued with its stale inputs.
    rearmed |= {i for i in failed if any(c in again for c in inputs_of[i])}
    token = {node_id: got[2] for node_id, got in read.items()}
    every = tuple((i + 1, token[ids[i]]) for i in sorted(chosen))
    arms = [Rearm("arm", finisher, token[finisher], every)]
    for i in sorted(rearmed, reverse=True):
        stones = tuple((k, token[c]) for k, c in enumerate(inputs_of[i], start=1) if c in again)
        arms.append(Rearm("arm", ids[i], token[ids[i]], stones))
    requeues = tuple(Rearm("requeue", ids[i], token[ids[i]]) for i in failed if i not in rearmed)
    return RetryPlan(_deadline_ms(fields), tuple(arms), requeues)


def _deadline_ms(fields: Mapping[str, Any]) -> int:
    raw = fields.get(WorkflowFields.DEPENDENCY_TIMEOUT)
    if raw is None:
        return -1
    return int(float(as_text(raw)) * 1000)


#: A node as :func:`_read_nodes` reads it: state, cancel reason, token, input ids.
_NodeRead = tuple[str, str, int, list[str]]


def _read_nodes(node_ids: Sequence[str]) -> dict[str, _NodeRead]:
    """The state, cancel reason, token and input ids of each node whose record exists (one
    pipeline per queue)."""
    found: dict[str, _NodeRead] = {}
    for ref, ids in _by_queue(node_ids):
        client = ref.client()
        with redis_errors(client):
            pipe = client.pipeline(transaction=False)
            for node_id in ids:
                pipe.hmget(
                    ref.keys.job(node_id),
                    [
                        JobFields.STATE,
                        JobFields.CANCEL_REASON,
                        JobFields.TOKEN,
                        JobFields.INPUT_IDS,
                    ],
                )
            replies = pipe.execute()
        for node_id, (st, reason, token, inputs) in zip(ids, replies, strict=True):
            if st is None:
                continue
            found[node_id] = (
                as_text(st),
                as_text(reason),
                int(as_text(token) or 0),
                as_text(inputs).split(),
            )
    return found


def _apply(plan: RetryPlan) -> None:
    """Send ``plan``'s steps: the arms, consecutive nodes of one queue in one call (batches
    of :data:`BATCH`), then the requeues per queue. Every step is idempotent."""
    for steps in (plan.arms, plan.requeues):
        runs: list[tuple[str, list[Rearm]]] = []
        for step in steps:
            queue = queue_of(step.job_id) or ""
            if runs and runs[-1][0] == queue and len(runs[-1][1]) < BATCH:
                runs[-1][1].append(step)
            else:
                runs.append((queue, [step]))
        for queue, batch in runs:
            ref = queue_ref(queue)
            run.execute(ref.client(), workflow_calls.wf_rearm(ref.keys, plan.deadline_ms, batch))


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
