"""Helpers for testing code that enqueues jobs: :func:`capture_jobs`, ``drain``, ``PrivateRedis``.

``drain`` (:func:`django_rqueue.draining.drain`, importable from here) runs the queued jobs in
the test's process until the queues are empty; ``PrivateRedis``
(:class:`django_rqueue.private_redis.PrivateRedis`, importable from here) starts a throw-away
``redis-server``. The pytest fixtures over these helpers are in
:mod:`django_rqueue.pytest_plugin`.

Inside ``with capture_jobs() as captured:``, ``.delay()`` and
``.delay_many()`` (``using(...)`` variants included) validate and resolve the
call as usual (a bad argument or an undeclared queue still raises) but, instead
of writing to Redis or running the job (even with ``RQUEUE["EAGER"]``), append a
:class:`CapturedJob` to ``captured`` and return its :class:`~django_rqueue.Job`
(status ``queued`` or ``scheduled``, a real id). Nothing touches Redis. Calls
are captured when made, inside ``transaction.atomic()`` too (``options["on_commit"]``
tells whether a real enqueue would wait for the commit); unique keys are recorded,
not enforced.

A workflow's ``.delay()`` (``chain``, ``group``, ``chord``) is compiled and checked as
usual, then recorded in ``captured.workflows`` as a :class:`CapturedWorkflow` (its nodes,
edges, callbacks and options) and returns its handle, ``running`` until
:meth:`CapturedWorkflow.run`. Its nodes are not in the flat list, so that running the flat
list in order never runs a node before its inputs. A ``.delay()`` with
``using(depends_on=[...])`` is one :class:`CapturedJob` whose ``options`` hold
``depends_on``.

The capture is held in a :mod:`contextvars` variable: a nested block captures
into its own list (the outer one does not see those calls), asyncio tasks
started inside the block are captured, and threads started inside it are not
(they begin with an empty context and enqueue for real).
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from . import enqueue, signals
from .dependencies import EVERY_INPUT
from .draining import Drained, DrainError, JobFailure, drain
from .eager_outcomes import give_inputs, outcomes
from .engine.fields import JobFields
from .execution import run_eager
from .job import Job, JobStatus
from .private_redis import PrivateRedis, RedisServerNotFound
from .workflows import eager
from .workflows.handle import Workflow, WorkflowState
from .workflows.nodes import WorkflowPlan

if TYPE_CHECKING:
    from .types import JobSpec

__all__ = [
    "CapturedJob",
    "CapturedJobs",
    "CapturedWorkflow",
    "DrainError",
    "Drained",
    "JobFailure",
    "PrivateRedis",
    "RedisServerNotFound",
    "capture_jobs",
    "drain",
]


@dataclasses.dataclass
class CapturedJob:
    """One captured ``.delay()`` call (or one call of a ``.delay_many()``), or one node or
    callback of a captured workflow.

    ``options`` are the resolved options: ``queue``, ``priority``, ``group``,
    ``max_attempts``, ``timeout`` (s), ``result_ttl`` (s), ``unique_key`` (the
    string, a callable key already applied; ``""`` for none), ``unique_ttl`` (s),
    ``delay`` (s, or ``None``), ``run_at`` (aware datetime, or ``None``),
    ``expires`` (s from the enqueue, an aware datetime, or ``None``),
    ``on_commit``, ``depends_on`` (the parents' ids, a tuple, or ``None``),
    ``on_dependency_failure`` (``"cancel"`` or ``"run"``) and ``pass_results``
    (a bool; for a workflow node, whether its inputs' values come first).
    """

    job_function: JobSpec
    #: The Job ``.delay()`` returned; :meth:`run` updates it in place.
    job: Job[Any]
    options: dict[str, Any]
    ran: bool = False
    #: A workflow node's declared index (from 0); ``None`` for any other call.
    index: int | None = None
    #: The captured workflow it is a node or a callback of.
    workflow: CapturedWorkflow | None = dataclasses.field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.job.name

    @property
    def args(self) -> list[Any]:
        return self.job.args

    @property
    def kwargs(self) -> dict[str, Any]:
        return self.job.kwargs

    def run(self) -> Job[Any]:
        """Run the job inline as EAGER does (every attempt, signals) unless it already ran;
        return the finished Job (the same object ``.delay()`` returned).

        A job with ``depends_on`` first gets its parents' outcomes (they must have run:
        before it in :meth:`CapturedJobs.run_all`, or under EAGER) and may end
        ``cancelled`` without running, as EAGER decides it. A workflow's node or callback
        runs its whole workflow (:meth:`CapturedWorkflow.run`).

        Raises:
            JobStateError: a ``depends_on`` parent has not run in this process.
        """
        if self.workflow is not None:
            self.workflow.run()
            return self.job
        if self.ran:
            return self.job
        parents = self.options.get("depends_on")
        runs = parents is None or give_inputs(
            self.job,
            parents,
            outcomes(parents),
            self.options["on_dependency_failure"],
            _pass_shape(parents) if self.options["pass_results"] else None,
        )
        self.ran = True
        if runs:
            run_eager(self.job_function, self.job)
        else:  # decided without running: announced as EAGER announces it
            signals.send(signals.job_enqueued, self.job_function, job=self.job)
        return self.job


@dataclasses.dataclass
class CapturedWorkflow:
    """One captured workflow ``.delay()``: its shape, checked and compiled, nothing run.

    ``edges``: ``(from, to)`` pairs of node indices (``to`` waits for ``from``), then
    ``("ext:<job id>", to)`` for each ``depends_on`` parent of a node, outside the
    workflow. ``options``: ``dependency_timeout`` (seconds, or ``None`` for no limit) and
    ``on_dependency_failure`` (each node's policy, ``"cancel"`` or ``"run"``, in declared
    order). ``on_error``/``on_complete``: the callbacks with the id, arguments (the workflow
    id first unless ``.si()``) and options a live finisher would enqueue them with.
    """

    id: str
    #: Every node, in declared order (``index`` 0, 1, ...).
    nodes: list[CapturedJob]
    edges: list[tuple[int | str, int]]
    on_error: CapturedJob | None
    on_complete: CapturedJob | None
    options: dict[str, Any]
    #: The handle ``.delay()`` returned: ``running`` until :meth:`run`, then ended.
    workflow: eager.EagerWorkflow
    ran: bool = False
    _plan: WorkflowPlan | None = dataclasses.field(default=None, repr=False)

    def run(self) -> Workflow:
        """Run the workflow inline with EAGER's semantics (nodes in topological order, the
        policies, ``workflow_finished``, the callbacks that apply) unless it already ran;
        return its handle, updated in place (so are the nodes' Jobs).

        Raises:
            JobStateError: a ``depends_on`` parent of a node has not run in this process.
        """
        if not self.ran and self._plan is not None:
            members = {eager.ON_ERROR: self.on_error, eager.ON_COMPLETE: self.on_complete}
            callbacks = {
                which: (c.job_function, c.job) for which, c in members.items() if c is not None
            }
            try:
                eager.run(self._plan, self.workflow, callbacks)
            finally:  # ran, unless refused before anything ran (a parent not run yet)
                for captured in (*self.nodes, *members.values()):
                    if captured is not None:
                        captured.ran = captured.job.status in _ENDED
                ended = self.workflow.state is not WorkflowState.RUNNING
                self.ran = ended or any(n.ran for n in self.nodes)
        return self.workflow


class CapturedJobs(list[CapturedJob]):
    """The calls captured by one :func:`capture_jobs` block, in call order; the workflows
    in :attr:`workflows`."""

    def __init__(self) -> None:
        super().__init__()
        #: The captured workflows, in call order.
        self.workflows: list[CapturedWorkflow] = []
        self._order: list[CapturedJob | CapturedWorkflow] = []

    def of(self, job_function: JobSpec | str) -> list[CapturedJob]:
        """The captured calls of one job (a ``@job`` function or its name)."""
        name = job_function if isinstance(job_function, str) else job_function.name
        return [c for c in self if c.name == name]

    def run_all(self) -> list[Job[Any]]:
        """Run every captured job and workflow not run yet, in call order, as EAGER does;
        return their Jobs (a workflow's: its nodes', in declared order).

        Called inside the block, jobs that these jobs enqueue are captured
        and run too, after them. With ``RQUEUE["EAGER_PROPAGATE"]`` the first
        failure's exception propagates.
        """
        done: list[Job[Any]] = []
        index = 0
        while index < len(self._order):  # the list may grow while jobs run
            captured = self._order[index]
            index += 1
            if captured.ran:
                continue
            if isinstance(captured, CapturedWorkflow):
                done += captured.run().jobs
            else:
                done.append(captured.run())
        return done


class _Recorder:
    """What :func:`capture_jobs` installs: it records calls and workflows into ``captured``."""

    def __init__(self, captured: CapturedJobs) -> None:
        self.captured = captured

    def __call__(self, submission: enqueue.Submission) -> Job[Any]:
        captured = CapturedJob(submission.plan.job_function, submission.job, _options(submission))
        if captured.options["depends_on"] is not None:
            captured.job.status = JobStatus.WAITING
        self.captured.append(captured)
        self.captured._order.append(captured)
        return captured.job

    def workflow(self, plan: WorkflowPlan) -> Workflow:
        """Record the compiled workflow ``plan``; return its handle (``running``)."""
        submissions = [eager.node_submission(plan, node) for node in plan.nodes]
        handle = eager.created(plan, [s.job for s in submissions])
        nodes: list[CapturedJob] = []
        for node, submission in zip(plan.nodes, submissions, strict=True):
            options = _options(submission)
            external = tuple(link.parent for link in plan.links if link.dependent == node.id)
            options["depends_on"] = external or None
            policy = node.fields.get(JobFields.ON_DEPENDENCY_FAILURE)
            options["on_dependency_failure"] = "run" if policy == "r" else "cancel"
            options["pass_results"] = JobFields.PASS_SHAPE in node.fields
            job_function = submission.plan.job_function
            nodes.append(CapturedJob(job_function, submission.job, options, index=node.index))
        index_of = {node.id: node.index for node in plan.nodes}
        edges: list[tuple[int | str, int]] = [*plan.edges]
        edges += [(f"ext:{link.parent}", index_of[link.dependent]) for link in plan.links]
        on: dict[str, CapturedJob | None] = dict.fromkeys((eager.ON_ERROR, eager.ON_COMPLETE))
        for which in (eager.ON_ERROR, eager.ON_COMPLETE):
            sub = eager.callback(plan, which)
            on[which] = (
                None if sub is None else CapturedJob(sub.plan.job_function, sub.job, _options(sub))
            )
        captured = CapturedWorkflow(
            id=plan.id,
            nodes=nodes,
            edges=edges,
            on_error=on[eager.ON_ERROR],
            on_complete=on[eager.ON_COMPLETE],
            options={
                "dependency_timeout": plan.deadline_ms / 1000 if plan.deadline_ms >= 0 else None,
                "on_dependency_failure": [n.options["on_dependency_failure"] for n in nodes],
            },
            workflow=handle,
            _plan=plan,
        )
        for member in (*nodes, captured.on_error, captured.on_complete):
            if member is not None:
                member.workflow = captured
        self.captured.workflows.append(captured)
        self.captured._order.append(captured)
        return handle


def _options(submission: enqueue.Submission) -> dict[str, Any]:
    """The resolved options of one captured call (see :class:`CapturedJob`); sets the
    Job's ``enqueued_at`` and ``run_at`` as an enqueue now would."""
    job, plan = submission.job, submission.plan
    now = datetime.datetime.now(datetime.UTC)
    delay = plan.delay_ms / 1000 if plan.delay_ms > 0 else None
    job.enqueued_at = now
    if job.run_at is None:
        job.run_at = now + datetime.timedelta(seconds=delay or 0)
    o = plan.job_function.options
    return {
        "queue": job.queue,
        "priority": job.priority,
        "group": job.group,
        "max_attempts": job.max_attempts,
        "timeout": job.timeout,
        "result_ttl": job.result_ttl,
        "unique_key": job.unique_key,
        "unique_ttl": plan.unique_ttl,
        "delay": delay,
        "run_at": job.run_at if plan.run_at_ms >= 0 else None,
        # Seconds from the enqueue, or an aware datetime, as given (None: never).
        "expires": plan.expires_in_ms / 1000 if plan.expires_in_ms >= 0 else job.expires_at,
        "on_commit": o.on_commit is not False,
        "depends_on": None if o.depends_on is None else tuple(o.depends_on),
        "on_dependency_failure": o.on_dependency_failure or "cancel",
        "pass_results": bool(o.pass_results),
    }


def _pass_shape(parents: tuple[str, ...]) -> str:
    """The pass shape of ``pass_results=True`` (as ``enqueue.dependent`` writes it)."""
    return EVERY_INPUT if parents else "[]"


#: The statuses of a job that ran (or was decided) to its end.
_ENDED = frozenset({JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED})


@contextmanager
def capture_jobs() -> Iterator[CapturedJobs]:
    """Capture the jobs and workflows enqueued inside the block instead of sending them
    (see module doc)."""
    captured = CapturedJobs()
    token = enqueue.capture.set(_Recorder(captured))
    try:
        yield captured
    finally:
        enqueue.capture.reset(token)
