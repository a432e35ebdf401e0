"""Write a compiled workflow (:class:`~.nodes.WorkflowPlan`) to Redis, whole or not at all.

:func:`submit` is the hook :meth:`Canvas.delay <.canvas.Canvas.delay>` calls. One
location (one Redis server, or one Cluster slot) is written ``live``: the record and every
batch of nodes in one ``MULTI``/``EXEC`` (:mod:`.multi`). Any other workflow is written
``staged`` (:mod:`.staged`): gated nodes behind one commit point. Inside
``transaction.atomic()`` the whole write is one ``on_commit`` callback: nothing is
written on a rollback. Transient failures are retried for
``enqueue.write.ENQUEUE_PATIENCE`` seconds, then
:class:`~django_rqueue.exceptions.WorkflowNotCreated`.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import cast

from django.db import transaction
from redis.backoff import EqualJitterBackoff

from ..conf import get_config
from ..engine import workflow_record
from ..engine.commands import Command
from ..engine.connection import get_client
from ..engine.fields import WorkflowFields
from ..engine.keys import QueueKeys
from ..enqueue import capture, commit, write
from ..enqueue.multi import execute_multi
from ..exceptions import (
    NotReplicated,
    RedisAuthenticationFailed,
    RedisUnavailable,
    WorkflowNotCreated,
)
from . import eager, staged
from .handle import Workflow, WorkflowState
from .nodes import WorkflowPlan
from .staged import nodes_command


def submit(plan: WorkflowPlan) -> Workflow:
    """Write ``plan`` (now, or at the commit of the current ``transaction.atomic()``) and
    return its handle, which has every id at once (``state`` ``running``).

    Raises:
        WorkflowNotCreated: Redis could not be reached for longer than
            ``ENQUEUE_PATIENCE``; ``committed`` says whether the workflow will run (inside
            ``transaction.atomic()``: raised by the on-commit write, after the commit).
        NotReplicated: a live creation under ``RQUEUE["MIN_REPLICAS_ACK"]`` was not
            confirmed by enough replicas in time (it was written to the master).
        JobStateError: under ``RQUEUE["EAGER"]``, a ``depends_on`` parent of a node did
            not run inline in this process (nothing ran).

    Inside ``capture_jobs()`` the workflow is recorded (``captured.workflows``), not
    written or run. Under ``RQUEUE["EAGER"]`` it runs inline at once (:func:`.eager.run`),
    even inside ``transaction.atomic()``, as a job does: the handle returned has ended.
    Neither touches Redis.
    """
    hook = capture.get()
    if hook is not None:  # capture_jobs(): its recorder takes workflows too
        recorded: Workflow = getattr(hook, "workflow")(plan)  # noqa: B009 - a duck-typed hook
        return recorded
    if get_config().eager:
        return eager.run(plan)
    workflow = Workflow(
        id=plan.id,
        state=WorkflowState.RUNNING,
        name=str(plan.record.get(WorkflowFields.NAME, "")),
        node_ids=[n.id for n in plan.nodes],
    )
    if transaction.get_connection().in_atomic_block:
        commit.defer(functools.partial(write_plan, plan), [])
    else:
        write_plan(plan)
    return workflow


def write_plan(plan: WorkflowPlan) -> None:
    """Write ``plan`` now: ``live`` or ``staged`` as its :attr:`~.WorkflowPlan.path` says,
    sending it again through a transient failure for up to ``ENQUEUE_PATIENCE`` seconds
    (every step is idempotent).

    A workflow with ``depends_on`` parents on a node is always written staged.

    Raises:
        WorkflowNotCreated: the failure lasted longer, or the pollers rolled the creation
            back meanwhile (``committed`` says whether it will run).
        JobStateError: a ``depends_on`` parent of a node does not exist (nothing is left).
    """
    backoff = EqualJitterBackoff(cap=write.ENQUEUE_RETRY, base=write.ENQUEUE_RETRY / 8)
    deadline = time.monotonic() + write.ENQUEUE_PATIENCE
    failures = 0
    if plan.path == "live" and plan.links:
        # A depends_on parent that is missing must refuse the workflow before anything of
        # it can run, which one MULTI cannot do: written staged (its links before its commit).
        plan = dataclasses.replace(plan, path="staged")
    creation = staged.Creation(plan) if plan.path == "staged" else None
    while True:
        try:
            if creation is None:
                write_live(plan)
            else:
                creation.run()
            return
        except RedisUnavailable as exc:
            delay = backoff.compute(failures)
            failures += 1
            if isinstance(exc, RedisAuthenticationFailed) or time.monotonic() + delay > deadline:
                committed = creation is not None and creation.committed
                raise WorkflowNotCreated(plan.id, committed, str(exc)) from exc
            time.sleep(delay)


def write_live(plan: WorkflowPlan) -> None:
    """The record and every node of a one-location ``plan`` in one ``MULTI``/``EXEC``.

    With ``RQUEUE["MIN_REPLICAS_ACK"]`` a ``WAIT`` follows the ``EXEC`` on its connection.

    Raises:
        RedisUnavailable: Redis cannot be reached (nothing, or everything, was written).
        NotReplicated: fewer replicas than ``MIN_REPLICAS_ACK`` confirmed it in time (it was
            written to the master); ``job_ids``: every node and the finisher.
    """
    home = QueueKeys.of(plan.key_prefix, plan.home)
    fields = cast("dict[str, str | int]", dict(plan.record))
    steps: list[Command[object]] = [
        cast("Command[object]", workflow_record.create(home, plan.id, fields)),
        *(nodes_command(batch) for batch in plan.batches()),
    ]
    wait = write.replica_wait(get_config())
    _, acked = execute_multi(get_client(plan.home), steps, wait)
    if wait is not None and acked < wait.replicas:
        ids = [*(n.id for n in plan.nodes), plan.finisher.id]
        raise NotReplicated(ids, acked, wait.replicas, wait.timeout_ms / 1000)
