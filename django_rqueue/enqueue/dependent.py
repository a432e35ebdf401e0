"""``.delay()`` / ``.adelay()`` of a job with ``using(depends_on=...)``: a waiting job linked
to jobs already enqueued.

The job (``D``) is written in three steps, each idempotent, on the queues concerned:

1. ``wf_nodes.lua gated``: ``D`` waits (``JobStatus.WAITING``) for its parents and for its
   gate (input 0), scored in its queue's ``waiting`` by a grace of :data:`CREATE_GRACE_MS`
   (a creator that dies before step 3 leaves a job the pollers' sweep removes);
2. ``dep_link.lua`` per parent, on the parent's queue: a parent still running delivers its
   outcome when it ends; one that had ended delivers it now (on another queue: applied on
   ``D``'s with ``dep_apply.lua``);
3. the gate opened (``dep_apply (D, 0, 'g0:')``), which puts ``D``'s real dependency
   deadline in ``waiting``; ``D`` is released at once if every parent had ended.

When every parent is on ``D``'s queue (and the outbox is not forced) the three steps are
one ``MULTI`` (:mod:`.multi`). Under ``RQUEUE["MIN_REPLICAS_ACK"]`` a ``WAIT`` follows the
last write on its connection.

A parent that does not exist raises :class:`~django_rqueue.exceptions.JobStateError` and ``D`` is
deleted. Inside ``transaction.atomic()`` the three steps run at the commit.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, cast

from asgiref.sync import sync_to_async
from redis.backoff import EqualJitterBackoff

from .. import signals
from ..conf import Config, get_config
from ..dependencies import EVERY_INPUT, GATE_OPEN, Edge, EdgePath
from ..eager_outcomes import give_inputs, outcomes
from ..encryption import seal
from ..engine import commands, dependency_commands, run
from ..engine.commands import Command
from ..engine.connection import get_client
from ..engine.dependency_calls import Node
from ..engine.dependency_replies import Linked, LinkOutcome
from ..engine.fields import JobFields
from ..engine.keys import QueueKeys, new_job_id, queue_of
from ..engine.run import ReplicaWait
from ..exceptions import (
    JobStateError,
    NotReplicated,
    RedisAuthenticationFailed,
    RedisUnavailable,
    WorkflowNotCreated,
)
from ..execution import arun_eager, run_eager
from ..job import Job, JobStatus
from ..options import NO_TIMEOUT, NoTimeout
from ..serialization import encode_arguments
from . import commit, write
from .multi import execute_multi
from .plan import Plan, Submission

if TYPE_CHECKING:
    from ..types import JobSpec

#: Milliseconds a job with ``depends_on`` may stay gated (its creator between step 1 and
#: step 3) before the pollers' sweep deletes it.
CREATE_GRACE_MS: Final = 60_000
#: What the argument check binds in place of the value prepended (``pass_results=True``).
_PREPENDED: Final[Any] = object()
#: ``cancel.lua`` wants a TTL > 0 in either mode (``delete`` keeps nothing).
_TTL: Final = 1


class Dependent:
    """One validated and encoded ``.delay()`` with ``depends_on``; calling it writes it."""

    def __init__(
        self, job_function: JobSpec, args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> None:
        config = get_config()
        o = job_function.options
        parents = tuple(o.depends_on or ())
        if o.unique_key is not None or o.job_id is not None:
            raise ValueError("a job with using(depends_on=...) takes no unique_key and no job_id")
        for parent in parents:
            parent_queue = queue_of(parent)
            if parent_queue is None:
                raise ValueError(f"depends_on: {parent!r} is not a job id")
            config.queue(parent_queue)  # ValueError: not declared
        plan = Plan.of(job_function, config)
        self.plan, self.parents, self.config = plan, parents, config
        passed = bool(o.pass_results)
        check_args = (_PREPENDED, *args) if passed else tuple(args)
        job_function.check_arguments(check_args, kwargs)
        skip = int(job_function.takes_context) + int(passed)
        payload = encode_arguments(args, kwargs, job_function.func, skip=skip)
        if len(payload) > plan.max_payload:
            raise ValueError(
                f"the arguments of {job_function.name} take {len(payload)} bytes as JSON, "
                f"more than RQUEUE['MAX_PAYLOAD_BYTES'] ({plan.max_payload})"
            )
        self.job_id = new_job_id(plan.queue)
        fields: dict[str, str | int] = {**plan.record, JobFields.PAYLOAD: seal(payload)}
        if parents:
            fields[JobFields.INPUT_COUNT] = len(parents)
            fields[JobFields.INPUT_IDS] = " ".join(parents)
        if o.on_dependency_failure == "run":
            fields[JobFields.ON_DEPENDENCY_FAILURE] = "r"
        if passed:
            fields[JobFields.PASS_SHAPE] = EVERY_INPUT if parents else "[]"
        if plan.delay_ms > 0:
            fields[JobFields.RELEASE_DELAY] = plan.delay_ms
        headers = plan.headers(self.job_id, args, kwargs)  # RQUEUE["MIDDLEWARE"]'s
        if headers:
            fields[JobFields.HEADERS] = headers
        self.fields = fields
        self.payload = fields[JobFields.PAYLOAD]
        self.deadline_ms = _deadline_ms(o.dependency_timeout, config)
        self.job: Job[Any] = plan.job(self.job_id, args, kwargs, "")
        if headers:
            self.job.headers = json.loads(headers)
        self.job.status = JobStatus.WAITING
        self.gate_opened = False

    def decide_eagerly(self) -> bool:
        """Under EAGER: give the job its parents' recorded outcomes; whether it runs (else
        it has ended ``cancelled``, ``dependency_failed``:
        :func:`~django_rqueue.eager_outcomes.give_inputs`).

        Raises:
            JobStateError: a parent did not run under EAGER in this process.
        """
        o = self.plan.job_function.options
        return give_inputs(
            self.job,
            self.parents,
            outcomes(self.parents),
            "run" if o.on_dependency_failure == "run" else "cancel",
            None
            if JobFields.PASS_SHAPE not in self.fields
            else str(self.fields[JobFields.PASS_SHAPE]),
        )

    def path(self, parent: str) -> EdgePath:
        """``i`` when the parent is on this job's queue (and the outbox is not forced)."""
        same = queue_of(parent) == self.plan.queue
        return "i" if same and not self.config.workflow_force_outbox else "o"

    def __call__(self) -> Job[Any]:
        """Write it, sending it again through a transient failure for up to
        ``ENQUEUE_PATIENCE`` seconds; send ``job_enqueued``.

        Raises:
            JobStateError: a parent does not exist (the job is deleted).
            WorkflowNotCreated: Redis could not be reached for longer.
            NotReplicated: under ``RQUEUE["MIN_REPLICAS_ACK"]``, fewer replicas confirmed
                it in time (after ``job_enqueued``: it was written to the master).
        """
        backoff = EqualJitterBackoff(cap=write.ENQUEUE_RETRY, base=write.ENQUEUE_RETRY / 8)
        deadline = time.monotonic() + write.ENQUEUE_PATIENCE
        failures = 0
        wait = write.replica_wait(self.config)
        while True:
            try:
                acked = self.write(wait)
                break
            except RedisUnavailable as exc:
                delay = backoff.compute(failures)
                failures += 1
                if isinstance(exc, RedisAuthenticationFailed) or (
                    time.monotonic() + delay > deadline
                ):
                    raise WorkflowNotCreated(self.job_id, self.gate_opened, str(exc)) from exc
                time.sleep(delay)
        signals.send(signals.job_enqueued, self.plan.job_function, job=self.job)
        if wait is not None and acked < wait.replicas:
            raise NotReplicated([self.job_id], acked, wait.replicas, wait.timeout_ms / 1000)
        return self.job

    def write(self, wait: ReplicaWait | None = None) -> int:
        """The three steps (see the module docstring): one ``MULTI`` when every parent is
        on this job's queue (and the outbox is not forced), else one after the other.
        Returns the replicas that confirmed the last write (0 without ``wait``).

        Raises:
            JobStateError: a parent does not exist (this job is deleted first).
        """
        plan = self.plan
        client = get_client(plan.queue)
        node = Node(
            self.job_id, plan.priority, plan.group, 0, plan.run_at_ms, self.fields, source=True
        )
        create = dependency_commands.wf_nodes(
            plan.keys, [node], mode="gated", deadline_ms=self.deadline_ms, grace_ms=CREATE_GRACE_MS
        )
        gate = dependency_commands.dep_apply(plan.keys, [(self.job_id, 0, GATE_OPEN.encode())])
        if all(self.path(parent) == "i" for parent in self.parents):
            links = [self.link_command(k, p) for k, p in enumerate(self.parents, start=1)]
            steps = cast("list[Command[Any]]", [create, *links, gate])
            replies, acked = execute_multi(client, steps, wait)
            for parent, linked in zip(self.parents, replies[1:-1], strict=True):
                if linked.outcome is LinkOutcome.MISSING:
                    self.missing(parent)
            self.gate_opened = True
            return acked
        run.execute(client, create)
        for k, parent in enumerate(self.parents, start=1):
            self.link(k, parent)
        acked = 0
        if wait is None:
            run.execute(client, gate)
        else:
            _, acked = run.execute_and_wait(client, gate, wait)
        self.gate_opened = True
        return acked

    def link_command(self, k: int, parent: str) -> Command[Linked]:
        """``dep_link.lua`` on the parent's queue for input ``k``."""
        parent_queue = queue_of(parent) or ""
        path = self.path(parent)
        entry = Edge("p", path, k, self.job_id).encode()
        keys = QueueKeys.of(self.config.key_prefix, parent_queue)
        return dependency_commands.dep_link(keys, parent, entry, same_queue=path == "i")

    def link(self, k: int, parent: str) -> None:
        """Step 2 for input ``k``, on its own.

        Raises:
            JobStateError: the parent does not exist (this job is deleted first).
        """
        plan = self.plan
        got = run.execute(get_client(queue_of(parent) or ""), self.link_command(k, parent))
        if got.outcome is LinkOutcome.MISSING:
            self.missing(parent)
        if got.outcome is LinkOutcome.ENDED and got.value is not None:
            arrival = [(self.job_id, k, got.value)]
            run.execute(get_client(plan.queue), dependency_commands.dep_apply(plan.keys, arrival))

    def missing(self, parent: str) -> None:
        """Delete this job (it waits for a parent that will never end) and raise.

        Raises:
            JobStateError: always.
        """
        plan = self.plan
        run.execute(get_client(plan.queue), commands.cancel(plan.keys, self.job_id, "delete", _TTL))
        raise JobStateError(f"depends_on: job {parent} does not exist", None)


def submit(
    job_function: JobSpec,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    capture: Callable[[Submission], Job[Any]] | None = None,
) -> Job[Any]:
    """Enqueue one call of ``job_function`` that has ``using(depends_on=...)``: now, or at
    the commit of the current ``transaction.atomic()`` (unless ``on_commit=False``).

    With ``capture`` (``capture_jobs()``'s hook) it is captured (its options hold
    ``depends_on``), not written.

    Raises:
        TypeError: the arguments do not fit (after one prepended value with
            ``pass_results=True``), or JSON cannot carry one.
        ValueError: an undeclared queue, a parent that is not a job id, ``unique_key`` or
            ``job_id``, arguments over ``RQUEUE["MAX_PAYLOAD_BYTES"]``.
        JobStateError: a parent does not exist (nothing is left written).
        WorkflowNotCreated: Redis could not be reached for ``ENQUEUE_PATIENCE`` seconds.

    Under ``RQUEUE["EAGER"]`` nothing is written: every parent must have run under EAGER in
    this process (:mod:`~django_rqueue.eager_outcomes`; one that did not raises the
    ``JobStateError`` of a parent that does not exist), and the job is decided at once as
    a live one is when its last parent ends: it runs inline with its parents' values, or
    ends ``cancelled`` (``dependency_failed``) under ``on_dependency_failure="cancel"``.
    """
    dependent = Dependent(job_function, args, kwargs)
    if capture is not None:  # capture_jobs(): its options say depends_on
        payload = str(dependent.payload)
        captured: Job[Any] = capture(
            Submission(dependent.plan, dependent.job_id, args, kwargs, "", payload)
        )
        return captured
    if get_config().eager:
        if dependent.decide_eagerly():
            return run_eager(job_function, dependent.job)
        signals.send(signals.job_enqueued, job_function, job=dependent.job)
        return dependent.job
    if commit.deferred(job_function):
        commit.defer(functools.partial(dependent), [])
        return dependent.job
    return dependent()


async def asubmit(
    job_function: JobSpec,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    capture: Callable[[Submission], Job[Any]] | None = None,
) -> Job[Any]:
    """:func:`submit` for async code (in ``sync_to_async``'s thread, where the caller's
    transaction lives; under ``RQUEUE["EAGER"]`` the job runs on the running event loop, as
    ``adelay()`` runs one)."""
    if capture is None and get_config().eager:
        dependent = Dependent(job_function, args, kwargs)
        if dependent.decide_eagerly():
            return await arun_eager(job_function, dependent.job)
        await signals.asend(signals.job_enqueued, job_function, job=dependent.job)
        return dependent.job
    return await sync_to_async(submit, thread_sensitive=True)(job_function, args, kwargs, capture)


def _deadline_ms(timeout: float | NoTimeout | None, config: Config) -> int:
    """The dependency deadline offset in ms (-1: none): the job's, else the setting's."""
    if timeout is None:
        timeout = config.workflow_dependency_timeout
    if timeout is None or timeout is NO_TIMEOUT or isinstance(timeout, NoTimeout):
        return -1
    return max(1, round(timeout * 1000))
