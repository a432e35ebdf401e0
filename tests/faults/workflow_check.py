"""The workflow invariants of the fault tests: every workflow final, each body released once
with its full input list, nothing lost, nothing left waiting.

Used through :meth:`tests.faults.harness.Faults.wait_workflows` and
:meth:`~tests.faults.harness.Faults.check_workflows`. The nodes are the ``wf_*`` ledger jobs
of ``tests/jobs_app/workflow_jobs.py`` (their runs and accepted acks are in the ledger);
the check is read-only and after the fact:

- each workflow's record is in the expected final state, its finisher ``succeeded``;
- its ``on_complete`` callback, and its ``on_error`` if it failed, was enqueued once (one
  job under its fixed id), the other never;
- :meth:`~tests.faults.harness.Faults.check` holds for every node and callback (terminal,
  none lost, acked once by the holder of its final token: they are ``wf_*`` jobs too);
- every run of a node that takes its inputs (a body, a chain's later node) received, in
  its ``start`` line, its inputs' results in order (as Redis holds them: the values of the
  runs whose acks were accepted), and it ran at most once per attempt;
- the ``released`` counts of the queues' ``stats`` add up to the number of nodes (and
  finishers) that were created waiting and did not end cancelled: each released once. So
  these must be the only workflows released since Redis was flushed;
- no job left in any queue's ``waiting``, no outbox entry (read or not), no ``next:`` key,
  no creation left open in ``wfopen``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import redis

from django_rqueue.conf import get_config
from django_rqueue.engine.fields import JobFields, WorkflowFields
from django_rqueue.engine.keys import QueueKeys, finisher_id, queue_of
from django_rqueue.inputs import prepend
from django_rqueue.serialization import loads
from django_rqueue.workflows import WorkflowState
from django_rqueue.workflows.handle import Workflow
from tests.support.waiting import wait_until

if TYPE_CHECKING:
    from .harness import Faults, Report

#: The record states a workflow ends in.
FINAL = {s.value for s in WorkflowState} - {WorkflowState.RUNNING.value}
#: The states a job (a finisher) ends in.
ENDED = {"succeeded", "failed", "cancelled"}
#: Seconds the leftover check waits for a relay's last ``XACK``/``XDEL`` after the end.
LEFTOVER_PATIENCE = 5.0


@dataclass
class WorkflowReport:
    """What :func:`check_workflows` found (it already asserted the invariants)."""

    #: :meth:`Faults.check` of every node.
    nodes: Report
    #: The workflows as read at the end, by id.
    workflows: dict[str, Workflow]
    #: What each run of a node that takes its inputs received, by node id, in run order.
    received: dict[str, list[Any]]
    #: Nodes and finishers released (the ``stats`` counts, added up).
    released: int
    #: The ids of the callbacks enqueued (``on_complete``, ``on_error``), checked as nodes.
    callbacks: list[str]

    def node_ids(self, workflow_id: str) -> list[str]:
        return self.workflows[workflow_id].node_ids


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _keys(queue: str) -> QueueKeys:
    return QueueKeys.of(get_config().key_prefix, queue)


def _record_key(workflow_id: str) -> str:
    return _keys(queue_of(workflow_id) or "").workflow(workflow_id)


def _job_key(job_id: str) -> str:
    return _keys(queue_of(job_id) or "").job(job_id)


def _hashes(client: redis.Redis, keys: list[str]) -> list[dict[str, str]]:
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.hgetall(key)
    return [{_text(a): _text(b) for a, b in raw.items()} for raw in pipe.execute()]


def _wait_states(
    faults: Faults, keys: list[str], field: str, final: set[str], timeout: float, what: str
) -> None:
    """Until the hash field ``field`` of every key is in ``final`` (pipelined polling; a
    Redis that is down or loading counts as not yet)."""
    pending = list(keys)

    def done() -> bool:
        nonlocal pending
        try:
            pipe = faults.client.pipeline(transaction=False)
            for key in pending:
                pipe.hget(key, field)
            states = pipe.execute()
        except (redis.ConnectionError, redis.BusyLoadingError):
            return False
        pending = [k for k, s in zip(pending, states, strict=True) if _text(s or "") not in final]
        return not pending

    wait_until(
        done,
        timeout=timeout,
        interval=0.1,
        message=f"{what} not final: {len(pending)} left, e.g. {pending[:3]}",
    )


def wait_workflows(faults: Faults, ids: list[str], timeout: float) -> None:
    """Until every workflow's record is final and its finisher has ended, then
    :meth:`Faults.wait_final` of their nodes and callbacks."""
    _wait_states(faults, [_record_key(w) for w in ids], "st", FINAL, timeout, "workflows")
    finishers = [_job_key(finisher_id(w)) for w in ids]
    _wait_states(faults, finishers, JobFields.STATE, ENDED, timeout, "finishers")
    records = _hashes(faults.client, [_record_key(w) for w in ids])
    jobs: list[str] = []
    for workflow_id, fields in zip(ids, records, strict=True):
        workflow = Workflow.from_fields(workflow_id, fields)
        jobs.extend(workflow.node_ids)
        jobs.extend(
            i for ids_ in _callbacks(faults.client, workflow, fields).values() for i in ids_
        )
    faults.wait_final(jobs, timeout=timeout)


def _callbacks(
    client: redis.Redis, workflow: Workflow, fields: dict[str, str]
) -> dict[str, list[str]]:
    """The callback jobs of the workflow's last end that exist, by kind (``"c"`` its
    ``on_complete``, ``"e"`` its ``on_error``), on whichever queue they are: each kind it
    declared, ``[]`` when none was enqueued (more than one id: one on several queues)."""
    declared = json.loads(fields.get(WorkflowFields.CALLBACKS) or "{}")
    random_part = workflow.id.partition(":")[2]
    queues = list(get_config().queues)
    found: dict[str, list[str]] = {}
    for which in declared:
        candidates = [f"{q}:{random_part}.{which}{workflow.generation}" for q in queues]
        pipe = client.pipeline(transaction=False)
        for job_id in candidates:
            pipe.exists(_job_key(job_id))
        found[which] = [i for i, n in zip(candidates, pipe.execute(), strict=True) if n]
    return found


def _waited(fields: dict[str, str]) -> bool:
    """The job was created waiting: it has inputs, or it was a gated source (its gate's
    arrival, input 0, is recorded)."""
    return int(fields.get(JobFields.INPUT_COUNT) or 0) > 0 or JobFields.input_part(0) in fields


def check_workflows(
    faults: Faults, ids: list[str], state: WorkflowState = WorkflowState.SUCCEEDED
) -> WorkflowReport:
    """Assert the invariants of the module docstring for the workflows ``ids``; raise
    ``AssertionError`` naming every violation found."""
    client = faults.client
    problems: list[str] = []
    workflows: dict[str, Workflow] = {}
    callbacks: list[str] = []
    for workflow_id, fields in zip(
        ids, _hashes(client, [_record_key(w) for w in ids]), strict=True
    ):
        if not fields:
            problems.append(f"workflow {workflow_id}: no record")
            continue
        workflow = Workflow.from_fields(workflow_id, fields)
        workflows[workflow_id] = workflow
        if workflow.state is not state or workflow.problems:
            problems.append(
                f"workflow {workflow_id}: {workflow.state} {workflow.problems}, not {state}"
            )
        for which, found in _callbacks(client, workflow, fields).items():
            enqueued = which == "c" or workflow.state is WorkflowState.FAILED
            if len(found) != int(enqueued):
                problems.append(f"workflow {workflow_id}: callback {which!r} enqueued as {found}")
            callbacks.extend(found)
    finishers = [finisher_id(w) for w in workflows]
    for finisher, fields in zip(
        finishers, _hashes(client, [_job_key(f) for f in finishers]), strict=True
    ):
        if fields.get(JobFields.STATE) != "succeeded":
            problems.append(f"finisher {finisher}: {fields.get(JobFields.STATE)!r}")
    if problems:
        raise AssertionError("\n".join(problems))

    node_ids = [n for w in workflows.values() for n in w.node_ids]
    report = faults.check(node_ids + callbacks)
    results = {n: report.jobs[n].get(JobFields.RESULT, "") for n in node_ids}
    received: dict[str, list[Any]] = {}
    for event in faults.events("start"):
        if "received" in event and event.get("id") in results:
            received.setdefault(event["id"], []).append(event["received"])
    for node_id in node_ids + callbacks:
        fields = report.jobs[node_id]
        runs = report.starts[node_id]
        if runs > int(fields.get(JobFields.ATTEMPTS) or 0):
            problems.append(f"{node_id}: {runs} runs, {fields.get(JobFields.ATTEMPTS)} attempts")
        shape = fields.get(JobFields.PASS_SHAPE)
        if shape is None:
            continue
        inputs = (fields.get(JobFields.INPUT_IDS) or "").split()
        expected = prepend(shape, [loads(results[i]) if results.get(i) else None for i in inputs])
        got = received.get(node_id, [])
        if not got or any(r != expected for r in got):
            problems.append(f"{node_id}: received {got}, its inputs gave {expected!r}")

    every = node_ids + list(finishers)
    created_waiting = sum(
        1
        for fields in [
            *(report.jobs[n] for n in node_ids),
            *_hashes(client, [_job_key(f) for f in finishers]),
        ]
        if _waited(fields) and fields.get(JobFields.STATE) != "cancelled"
    )
    queues = list(get_config().queues)
    pipe = client.pipeline(transaction=False)
    for queue in queues:
        pipe.hget(_keys(queue).stats, "released")
    released = sum(int(n or 0) for n in pipe.execute())
    if released != created_waiting:
        problems.append(
            f"released {released} time(s), {created_waiting} node(s) of {len(every)} waited"
        )
    if problems:
        raise AssertionError(
            f"{len(problems)} workflow invariant violation(s):\n" + "\n".join(problems[:50])
        )

    def nothing_left() -> list[str]:
        return _leftovers(client, queues)

    try:
        wait_until(lambda: not nothing_left(), timeout=LEFTOVER_PATIENCE, interval=0.1)
    except AssertionError:
        raise AssertionError("left behind: " + "; ".join(nothing_left())) from None
    return WorkflowReport(report, workflows, received, released, callbacks)


def _leftovers(client: redis.Redis, queues: list[str]) -> list[str]:
    found: list[str] = []
    prefix = get_config().key_prefix
    for queue in queues:
        k = _keys(queue)
        waiting = [_text(i) for i in client.zrange(k.waiting, 0, 9)]
        if waiting:
            found.append(f"{queue}: waiting {waiting}")
        if client.zcard(k.opening):
            found.append(f"{queue}: {client.zcard(k.opening)} creation(s) open")
        if client.exists(k.outbox):
            length = client.xlen(k.outbox)
            pending = sum(int(g.get("pending", 0)) for g in client.xinfo_groups(k.outbox))
            if length or pending:
                found.append(f"{queue}: outbox holds {length} entries, {pending} pending")
    found.extend(
        f"key {_text(key)}" for key in client.scan_iter(match=f"{prefix}:{{*}}:next:*", count=1000)
    )
    return found
