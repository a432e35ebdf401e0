"""Run a compiled workflow inline, in this process, without Redis (``RQUEUE["EAGER"]``).

:func:`run` takes the :class:`~.nodes.WorkflowPlan` that ``.delay()`` compiled and runs its
nodes in declared order, which is a topological order (an element's inputs are declared
before it). Each node gets its inputs as the Lua side records them (an
:class:`~django_rqueue.dependencies.Arrival` per input:
:func:`~django_rqueue.eager_outcomes.give_inputs`) and is decided as
``include/node_decide.lua`` decides: under ``on_dependency_failure="cancel"`` a node whose
input did not succeed ends ``cancelled`` with ``CancelReason.DEPENDENCY_FAILED`` (and so,
in turn, do the nodes after it); under ``"run"`` it runs with a ``DependencyFailed`` in place
of that input. A node that runs goes through :func:`~django_rqueue.execution.run_eager`
(every attempt, the job signals, no ``job_enqueued``: a live creation sends none either),
its inputs' values put in front of its arguments by ``arguments()`` as in a worker. The
``depends_on`` parents of a node must have run under EAGER in this process
(:mod:`~django_rqueue.eager_outcomes`).

Then the finisher's logic: the state (``failed`` if a node failed or was cancelled, else
``succeeded``), the result, ``workflow_finished`` sent once, ``on_error`` (``failed`` only)
and ``on_complete`` run inline once, with the ids a live finisher gives them. With
``RQUEUE["EAGER_PROPAGATE"]`` the first final failure's exception propagates out of
``.delay()`` and nothing after it runs (no signal, no callback).

The handle returned is an :class:`EagerWorkflow`: its ``state``, ``jobs``, ``result`` and
``wait()`` are the in-memory ones, and ``retry_failed()`` re-runs inline
(:func:`retry_failed`). Nothing is written, so
:func:`~django_rqueue.workflows.get_workflow` does not know the workflow (it reads Redis).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from .. import registry, signals
from ..conf import get_config
from ..dependencies import Arrival, Dependents
from ..eager_outcomes import arrival_of, give_inputs, outcomes
from ..encryption import sealed, unseal
from ..engine.fields import JobFields, WorkflowFields
from ..enqueue.plan import Plan, Submission
from ..exceptions import UnknownJob, WorkflowStateError
from ..execution import run_eager
from ..inputs import OnFailure
from ..job import CancelReason, Job, JobStatus
from ..options import using_options
from ..serialization import decode_arguments, dumps
from .handle import Workflow, WorkflowState
from .nodes import NodePlan, WorkflowPlan
from .shapes import Tree

if TYPE_CHECKING:
    from ..types import JobSpec

#: The ``on_error`` callback's key in the record's ``cb`` JSON (as :mod:`.finish` reads it).
ON_ERROR: Final = "e"
#: The ``on_complete`` callback's key in the record's ``cb`` JSON.
ON_COMPLETE: Final = "c"
#: The options of a callback stored as ISO 8601 text (``using()`` takes datetimes).
_DATETIMES: Final = frozenset({"run_at", "expires"})


@dataclasses.dataclass
class EagerWorkflow(Workflow):
    """A workflow that ran inline (EAGER), or that ``capture_jobs()`` recorded: the handle
    holds its state, its nodes' Jobs and its result in memory, and never reads Redis.

    :meth:`refresh` changes nothing; :meth:`wait` and :meth:`await_` return it at once
    once it has run (a captured workflow that has not run raises ``TimeoutError``: only
    ``CapturedWorkflow.run()`` runs it); :meth:`cancel` raises
    :class:`~django_rqueue.exceptions.WorkflowStateError` (it has ended); :meth:`retry_failed`
    runs the failed nodes again inline (:func:`retry_failed`).
    """

    _plan: WorkflowPlan | None = dataclasses.field(default=None, repr=False)

    def refresh(self) -> None:
        """Nothing to read: the handle is the workflow."""

    def wait(self, timeout: float) -> Workflow:
        """Return it (it has run).

        Raises:
            TimeoutError: it was captured and has not run.
        """
        if self.state is WorkflowState.RUNNING:
            raise TimeoutError(
                f"workflow {self.id} was captured and has not run: CapturedWorkflow.run()"
            )
        return self

    async def await_(self, timeout: float) -> Workflow:
        """:meth:`wait` for async code."""
        return self.wait(timeout)

    def cancel(self) -> None:
        """Raises:
        WorkflowStateError: always (it ran inline and has ended, or was only captured)."""
        raise WorkflowStateError(
            f"cannot cancel workflow {self.id}: it ran inline (RQUEUE['EAGER']) or was "
            "captured, and nothing of it is in Redis",
            self.id,
            self.state.value,
        )

    def retry_failed(self) -> None:
        """Run the failed nodes again inline, then the nodes they cancelled, never a node
        that succeeded; the workflow ends again (``workflow_finished`` again, its callbacks
        again with the next generation's ids): :func:`retry_failed`.

        Raises:
            WorkflowStateError: it has not ended ``failed``, or has no failed node.
            Exception: with ``RQUEUE["EAGER_PROPAGATE"]``, the first final failure's.
        """
        retry_failed(self)


def created(plan: WorkflowPlan, jobs: list[Job[Any]] | None = None) -> EagerWorkflow:
    """The handle of ``plan`` before it runs: ``running``, with ``jobs`` (else every node's
    Job as a creation leaves it: ``queued`` or ``scheduled`` without inputs, ``waiting``
    with some; :func:`node_submission`)."""
    if jobs is None:
        jobs = [node_submission(plan, n).job for n in plan.nodes]
    return EagerWorkflow(
        id=plan.id,
        state=WorkflowState.RUNNING,
        name=str(plan.record.get(WorkflowFields.NAME, "")),
        node_ids=[n.id for n in plan.nodes],
        created_at=datetime.datetime.now(datetime.UTC),
        _jobs=jobs,
        _plan=plan,
    )


def node_submission(plan: WorkflowPlan, node: NodePlan) -> Submission:
    """A node as one call of its job (its Job has the workflow id, its dependents and, when
    it waits, status ``waiting``)."""
    if node.plan is None:  # pragma: no cover - only the finisher has none
        raise ValueError(f"{node.id} is not a node")
    payload = str(node.fields[JobFields.PAYLOAD])
    submission = Submission(node.plan, node.id, node.args, node.kwargs, "", payload)
    submission.headers = str(node.fields.get(JobFields.HEADERS, ""))
    job = submission.job
    job.workflow_id = plan.id
    dependents = node.fields.get(JobFields.DEPENDENTS)
    if dependents:
        job.dependents = Dependents.decode(str(dependents))
    if node.input_ids:
        job.status = JobStatus.WAITING
    return submission


def run(
    plan: WorkflowPlan,
    workflow: EagerWorkflow | None = None,
    callbacks: Mapping[str, tuple[JobSpec, Job[Any]]] | None = None,
) -> EagerWorkflow:
    """Run ``plan`` inline (see the module docstring); return its handle (``workflow``, run
    in place, when given: a captured one), ended. ``callbacks``: the callbacks' job
    functions and Jobs by :data:`ON_ERROR`/:data:`ON_COMPLETE` (a captured workflow's),
    instead of those :func:`callback` makes.

    Raises:
        JobStateError: a ``depends_on`` parent of a node did not run under EAGER in this
            process (nothing of the workflow ran).
        UnknownJob: a callback's job is not registered.
        Exception: with ``RQUEUE["EAGER_PROPAGATE"]``, the first final failure's.
    """
    ended: dict[str, Arrival] = outcomes([link.parent for link in plan.links])
    if workflow is None:
        workflow = created(plan)
    for node, job in zip(plan.nodes, workflow.jobs, strict=True):
        _run_node(node, job, ended)
        arrival = arrival_of(job)
        if arrival is not None:
            ended[node.id] = arrival
    _finish(plan, workflow, callbacks)
    return workflow


def _run_node(node: NodePlan, job: Job[Any], ended: Mapping[str, Arrival]) -> None:
    fields = node.fields
    shape = fields.get(JobFields.PASS_SHAPE)
    if node.input_ids or shape is not None:
        on_failure: OnFailure = (
            "run" if fields.get(JobFields.ON_DEPENDENCY_FAILURE) == "r" else "cancel"
        )
        pass_shape = None if shape is None else str(shape)
        if not give_inputs(job, node.input_ids, ended, on_failure, pass_shape):
            return
    if node.plan is not None:
        run_eager(node.plan.job_function, job, enqueued=False)


def retry_failed(workflow: EagerWorkflow) -> None:
    """``retry_failed()`` in process, as :func:`.control.retry_failed` plans it: the failed
    nodes, and the closure downstream of them through nodes ``cancelled`` with
    ``dependency_failed``, run again in declared order with ``attempts`` from 0 (a node
    with inputs decided again on its inputs' new outcomes); a node that succeeded keeps
    its outcome. Then the finisher's steps again, with ``generation`` + 1.

    Raises:
        WorkflowStateError: ``workflow`` has not ended ``failed`` or has no failed node.
    """
    plan, jobs = workflow._plan, workflow.jobs
    if plan is None or workflow.state is not WorkflowState.FAILED:
        shown = "not run (captured)" if workflow.state is WorkflowState.RUNNING else workflow.state
        raise WorkflowStateError(
            f"cannot retry the failed nodes of workflow {workflow.id}: it is {shown}",
            workflow.id,
            workflow.state.value,
        )
    failed = [i for i, job in enumerate(jobs) if job.status is JobStatus.FAILED]
    if not failed:
        raise WorkflowStateError(
            f"workflow {workflow.id} has no failed node to re-run", workflow.id, "failed"
        )
    dependents: dict[int, list[int]] = {}
    for source, target in plan.edges:
        dependents.setdefault(source, []).append(target)
    again, todo = set(failed), list(failed)
    while todo:
        for target in dependents.get(todo.pop(), ()):
            job = jobs[target]
            cancelled = job.cancel_reason is CancelReason.DEPENDENCY_FAILED
            if target not in again and job.status is JobStatus.CANCELLED and cancelled:
                again.add(target)
                todo.append(target)
    ended: dict[str, Arrival] = {}
    for job in jobs:  # what each node got, ``depends_on`` parents included
        if job.inputs is not None:
            ended.update((job.inputs.id_of(k), a) for k, a in job.inputs.arrivals.items())
    for job in jobs:
        arrival = arrival_of(job)
        if arrival is not None:
            ended[job.id] = arrival
    workflow.state, workflow._result, workflow.finished_at = WorkflowState.RUNNING, None, None
    for i in sorted(again):
        node, job = plan.nodes[i], jobs[i]
        job.status = JobStatus.WAITING if node.input_ids else JobStatus.QUEUED
        job.attempts, job.result, job.error = 0, None, None
        job.cancel_reason = job.started_at = job.finished_at = None
        _run_node(node, job, ended)
        arrival = arrival_of(job)
        if arrival is not None:
            ended[job.id] = arrival
    workflow.generation += 1
    _finish(plan, workflow, None)


def _finish(
    plan: WorkflowPlan,
    workflow: EagerWorkflow,
    callbacks: Mapping[str, tuple[JobSpec, Job[Any]]] | None,
) -> None:
    """The finisher's steps, in process: state, result, signal, callbacks."""
    jobs = workflow.jobs
    failed = any(j.status in (JobStatus.FAILED, JobStatus.CANCELLED) for j in jobs)
    state = WorkflowState.FAILED if failed else WorkflowState.SUCCEEDED
    if not failed:
        workflow._result = dumps(_arranged(plan.shape, [j.result for j in jobs]))
    workflow.state = state
    workflow.finished_at = datetime.datetime.now(datetime.UTC)
    signals.send(signals.workflow_finished, Workflow, workflow=workflow, state=state)
    for which in (ON_ERROR, ON_COMPLETE) if failed else (ON_COMPLETE,):
        if callbacks is not None:
            given = callbacks.get(which)
        else:
            submission = callback(plan, which, workflow.generation)
            given = None if submission is None else (submission.plan.job_function, submission.job)
        if given is not None:
            run_eager(*given)


def _arranged(tree: Tree, results: Sequence[Any]) -> Any:
    """The workflow's result: ``tree`` of node indices, each replaced by its result."""
    if isinstance(tree, int):
        return results[tree]
    return [_arranged(branch, results) for branch in tree]


def callback(plan: WorkflowPlan, which: str, generation: int = 0) -> Submission | None:
    """The ``on_error`` (``"e"``) or ``on_complete`` (``"c"``) call of ``plan`` as a live
    finisher enqueues it (``finish.enqueue_callback``): its id
    ``<queue>:<the workflow id's random part>.<which><generation>``, the workflow id first
    unless made with ``.si()``; ``None`` when the workflow has none.

    Raises:
        UnknownJob: its job is not registered.
    """
    raw = plan.record.get(WorkflowFields.CALLBACKS)
    spec: Mapping[str, Any] | None = json.loads(str(raw)).get(which) if raw else None
    if spec is None:
        return None
    name = str(spec["n"])
    job_function = registry.get(name)
    if job_function is None:
        raise UnknownJob(f"the workflow callback {name!r} is not registered")
    payload: str = spec["p"]
    args, kwargs = decode_arguments(unseal(payload) if sealed(payload) else payload)
    if not spec.get("i"):
        args = [plan.id, *args]
    options: dict[str, Any] = {
        key: datetime.datetime.fromisoformat(value)
        if key in _DATETIMES and isinstance(value, str)
        else value
        for key, value in dict(spec.get("o") or {}).items()
    }
    random_part = plan.id.partition(":")[2]
    own = using_options(**options, job_id=f"{random_part}.{which}{generation}")
    return Plan.of(job_function, get_config(), job_function.options.merged(own)).submission(
        args, kwargs
    )
