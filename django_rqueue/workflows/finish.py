"""The finisher of a workflow: the job that ends its record once every node has ended.

The job ``rqueue:workflow.finish`` (:data:`FINISHER`) waits for every node of its
workflow (policy ``run``: a failed node arrives as a
:class:`~django_rqueue.dependencies.DependencyFailed`) and gets the workflow's output
shape first. When it runs (:func:`finish`, at least once, like any job):

1. the state: ``failed`` if a node failed or was cancelled (it did not run), else
   ``succeeded``; the result, sealed as a job's result is (``""`` when failed);
2. ``wf_record finish`` ends the record (``cancelled`` when a ``cancel()`` came first);
3. ``workflow_finished`` is sent unless it was for this generation (``sig``), then noted;
4. ``on_error`` (``failed`` only) and ``on_complete`` are enqueued with fixed ids
   ``<queue>:<workflow's random part>.e<gen>`` / ``.c<gen>``: a run again creates nothing
   twice.

Only the ``rqueue:`` resolver :class:`~django_rqueue.apps.RqueueConfig` installs imports
this module (it builds on :mod:`django_rqueue.decorators`).
"""

from __future__ import annotations

import datetime
import json
import logging
from collections.abc import Mapping
from typing import Any, Final

from .. import registry, signals
from ..conf import get_config
from ..context import JobContext
from ..dependencies import CANCELLED, FAILED
from ..encryption import seal, sealed, unseal
from ..engine import commands, run, workflow_record
from ..engine.connection import as_text, get_client
from ..engine.fields import WorkflowFields
from ..engine.keys import QueueKeys
from ..engine.workflow_record import RecordState
from ..exceptions import UnknownJob
from ..job import Job
from ..job_functions import BaseJobFunction, ContextJobFunction
from ..options import JobOptions
from ..serialization import decode_arguments, encode_result
from ..types import JobSpec
from .handle import Workflow, WorkflowState, get_workflow
from .nodes import FINISHER_MAX_ATTEMPTS, FINISHER_NAME

logger = logging.getLogger("django_rqueue")

#: The callbacks' keys in the record's ``cb`` JSON: ``e`` on_error, ``c`` on_complete.
ON_ERROR: Final = "e"
ON_COMPLETE: Final = "c"
#: The options of a callback stored as ISO 8601 text (``using()`` takes datetimes).
_DATETIMES: Final = frozenset({"run_at", "expires"})


def finish(ctx: JobContext, result: Any = None) -> None:
    """End the workflow of this finisher job (see the module docstring); ``result`` is
    the workflow's output (its exit nodes' results, arranged by the output shape).

    Raises:
        ValueError: the job is not a workflow's finisher (no workflow id or inputs).
        RedisUnavailable: Redis cannot be reached (the job is retried).
        UnknownJob: a callback's job is not registered in this worker.
    """
    job = ctx.job
    workflow_id, inputs = job.workflow_id, job.inputs
    if not workflow_id or inputs is None:
        raise ValueError(f"job {job.id} is not a workflow's finisher")
    failed = any(a.kind in (FAILED, CANCELLED) for k, a in inputs.arrivals.items() if k >= 1)
    state = RecordState.FAILED if failed else RecordState.SUCCEEDED
    stored = "" if failed else seal(encode_result(result))
    config = get_config()
    keys = QueueKeys.of(config.key_prefix, job.queue)
    client = get_client(job.queue)
    read = run.execute(client, commands.read_hash(keys.workflow(workflow_id)))
    before = {as_text(k): v for k, v in read.items()}
    ttl = config.queue(job.queue).result_ttl
    reply = run.execute(client, workflow_record.finish(keys, workflow_id, state, stored, ttl))
    if reply.state is None or reply.generation is None:
        logger.warning("workflow %s: its record is gone (%s)", workflow_id, reply.outcome)
        return
    final = WorkflowState(reply.state.value)
    generation = reply.generation
    if as_text(before.get(WorkflowFields.SIGNALLED)) != str(generation):
        workflow = get_workflow(workflow_id)
        if workflow is None:  # deleted at once (result_ttl 0): as it was, ended
            workflow = Workflow.from_fields(workflow_id, read)
            workflow.state = final
        signals.send(signals.workflow_finished, Workflow, workflow=workflow, state=final)
        run.execute(client, workflow_record.signalled(keys, workflow_id, generation))
    raw = before.get(WorkflowFields.CALLBACKS)
    callbacks: Mapping[str, Any] = json.loads(raw) if raw else {}
    if final is WorkflowState.FAILED and ON_ERROR in callbacks:
        enqueue_callback(workflow_id, ON_ERROR, generation, callbacks[ON_ERROR])
    if ON_COMPLETE in callbacks:
        enqueue_callback(workflow_id, ON_COMPLETE, generation, callbacks[ON_COMPLETE])


def enqueue_callback(workflow_id: str, which: str, generation: int, spec: Mapping[str, Any]) -> str:
    """Enqueue the callback ``spec`` (``{"n": name, "p": payload, "i": immutable, "o":
    options}``, ``graph._Compiler.callback``) with the fixed id
    ``<queue>:<workflow_id's random part>.<which><generation>``, the workflow id first
    unless immutable; return its id (an existing job under it is left as it is).

    Raises:
        UnknownJob: its job is not registered in this worker.
    """
    name = str(spec["n"])
    job_function = registry.get(name)
    if not isinstance(job_function, BaseJobFunction):
        raise UnknownJob(f"the workflow callback {name!r} is not registered in this worker")
    payload: str = spec["p"]
    args, kwargs = decode_arguments(unseal(payload) if sealed(payload) else payload)
    if not spec.get("i"):
        args = [workflow_id, *args]
    options: dict[str, Any] = {
        key: datetime.datetime.fromisoformat(value)
        if key in _DATETIMES and isinstance(value, str)
        else value
        for key, value in dict(spec.get("o") or {}).items()
    }
    random_part = workflow_id.partition(":")[2]
    bound = job_function.using(**options, job_id=f"{random_part}.{which}{generation}")
    created: Job[Any] = bound.delay(*args, **kwargs)
    return created.id


#: The finisher job (registered under :data:`~.nodes.FINISHER_NAME`, past ``@job``'s
#: check of the ``rqueue:`` prefix).
FINISHER: Final = ContextJobFunction[Any, None](
    finish, FINISHER_NAME, JobOptions(max_attempts=FINISHER_MAX_ATTEMPTS)
)
registry.register(FINISHER)

_OWN: Final[Mapping[str, JobSpec]] = {FINISHER_NAME.removeprefix(registry.RQUEUE_PREFIX): FINISHER}


def own_job(name: str) -> JobSpec:
    """The package's own job ``"rqueue:<name>"``.

    Raises:
        UnknownJob: no such job.
    """
    found = _OWN.get(name)
    if found is None:
        raise UnknownJob(f"no job named {registry.RQUEUE_PREFIX}{name!r} in django_rqueue")
    return found
