"""Helpers of the whole-workflow tests: a workflow written to Redis from a compiled canvas, its
nodes run with the real transitions, the relay's work done, and its finisher's finish driven.

The creation here stands in for ``canvas.delay()`` (written in parallel): it writes
``plan.batches()`` with ``wf_nodes.lua``, the record with ``workflow_record.create``, and
opens the gates of a staged plan with ``dep_apply.lua``. The finisher job is not runnable
yet, so :func:`finish` reserves and acks it, then ends the record as it will.
"""

from __future__ import annotations

from typing import Any

import redis

from django_rqueue.engine import dependency_commands, dependency_replies, workflow_record
from django_rqueue.engine.calls import Retention
from django_rqueue.engine.commands import Command
from django_rqueue.engine.fields import JobFields
from django_rqueue.engine.keys import finisher_id, queue_of
from django_rqueue.engine.queue_ref import QueueRef, queue_ref
from django_rqueue.engine.run import execute
from django_rqueue.engine.values import as_text
from django_rqueue.engine.workflow_record import RecordReply, RecordState
from django_rqueue.execution import error_record
from django_rqueue.workflows import graph
from django_rqueue.workflows.nodes import WorkflowPlan
from tests.support import transitions

#: The queues of the test settings a workflow may touch.
QUEUES = ("default", "emails", "low")
KEPT = Retention(ttl=None, max_jobs=None)


def create(element: object) -> WorkflowPlan:
    """Compile ``element`` (a canvas) and write it as its creation will: every node, the
    finisher, the record (``running``), then the gates of a staged plan opened."""
    plan = graph.compile(element)
    write(plan)
    return plan


def write(plan: WorkflowPlan) -> None:
    """Write ``plan`` (see :func:`create`)."""
    for batch in plan.batches():
        ref = queue_ref(batch.queue)
        command = Command(batch.call, dependency_replies.nodes_refused)
        assert execute(ref.client(), command) == []
    home = queue_ref(plan.home)
    fields = {k: str(v) if isinstance(v, float) else v for k, v in plan.record.items()}
    assert execute(home.client(), workflow_record.create(home.keys, plan.id, fields)).done
    for node in plan.gated if plan.path == "staged" else ():
        ref = queue_ref(node.queue)
        opened = dependency_commands.dep_apply(ref.keys, [(node.id, 0, "g0:")])
        assert execute(ref.client(), opened).applied == 1


def ref_of(job_id: str) -> QueueRef:
    return queue_ref(queue_of(job_id) or "")


def job(job_id: str) -> dict[str, str]:
    """A job's hash as text (``{}`` when gone)."""
    ref = ref_of(job_id)
    raw: dict[bytes, bytes] = ref.client().hgetall(ref.keys.job(job_id))  # type: ignore[assignment]
    return {as_text(k): as_text(v) for k, v in raw.items()}


def state(job_id: str) -> str | None:
    return job(job_id).get(JobFields.STATE)


def token(job_id: str) -> int:
    return int(job(job_id).get(JobFields.TOKEN, "0"))


def reserve(job_id: str) -> int:
    """Reserve the next job of ``job_id``'s queue (after the relay's work), which must be
    it; its token."""
    relay()
    ref = ref_of(job_id)
    got = transitions.reserve(ref.client(), ref.keys, lease_ms=30_000, worker_id="w1")
    assert got is not None and got[0] == job_id, (got and got[0], job_id)
    return token(job_id)


def succeed(job_id: str, result: str = "null") -> int:
    """Reserve ``job_id`` (the next of its queue) and ack it; its token."""
    ref = ref_of(job_id)
    t = reserve(job_id)
    transitions.ack(ref.client(), ref.keys, job_id, t, result, 600)
    return t


def fail(job_id: str) -> int:
    """Reserve ``job_id`` (the next of its queue) and fail it for good; its token."""
    ref = ref_of(job_id)
    t = reserve(job_id)
    error = error_record(RuntimeError("boom"), "Traceback: boom\n")
    transitions.fail(ref.client(), ref.keys, job_id, t, error, -1, retention=KEPT)
    return t


def relay() -> int:
    """What the pollers' relays do, on one Redis: apply every outbox entry of every queue on
    its dependent's queue, then delete it, until the outboxes are empty. The entries applied."""
    applied = 0
    for _ in range(20):
        moved = 0
        for queue in QUEUES:
            ref = queue_ref(queue)
            client: redis.Redis = ref.client()
            entries: list[Any] = client.xrange(ref.keys.outbox)  # type: ignore[assignment]
            for entry_id, f in entries:
                target = ref_of(f[b"d"].decode())
                triple = (f[b"d"].decode(), int(f[b"x"]), f[b"v"].decode())
                execute(target.client(), dependency_commands.dep_apply(target.keys, [triple]))
                client.xdel(ref.keys.outbox, entry_id)
                moved += 1
        if not moved:
            return applied
        applied += moved
    raise AssertionError("the outboxes never emptied")


def finish(plan: WorkflowPlan) -> RecordReply:
    """What the finisher does once every node ended: reserved, it ends the record ``failed``
    when a node did not succeed (its inputs ``df``/``dc``), else ``succeeded``, then it is
    acked (an ack before the finish would find the record open: "finisher lost")."""
    relay()
    fid = finisher_id(plan.id)
    assert state(fid) == "queued", job(fid)
    t = reserve(fid)
    fields = job(fid)
    bad = int(fields.get(JobFields.INPUTS_FAILED, "0")) + int(
        fields.get(JobFields.INPUTS_CANCELLED, "0")
    )
    home = queue_ref(plan.home)
    st = RecordState.FAILED if bad else RecordState.SUCCEEDED
    got = execute(home.client(), workflow_record.finish(home.keys, plan.id, st, "", 600))
    transitions.ack(home.client(), home.keys, fid, t, "null", 600)
    return got


def record(plan: WorkflowPlan) -> dict[str, str]:
    """The workflow's record as text."""
    home = queue_ref(plan.home)
    raw: dict[bytes, bytes] = home.client().hgetall(home.keys.workflow(plan.id))  # type: ignore[assignment]
    return {as_text(k): as_text(v) for k, v in raw.items()}


def waiting(queue: str) -> set[str]:
    ref = queue_ref(queue)
    members: list[bytes] = ref.client().zrange(ref.keys.waiting, 0, -1)  # type: ignore[assignment]
    return {m.decode() for m in members}
