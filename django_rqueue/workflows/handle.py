"""A workflow as read from Redis: :class:`Workflow`, :class:`WorkflowState`, :func:`get_workflow`.

A workflow's record lives on its home queue (``engine/fields.py``'s
:class:`~django_rqueue.engine.fields.WorkflowFields`); its nodes are ordinary jobs, and
its finisher is a job that waits for every node, then ends the record (so
:meth:`Workflow.wait` waits for the finisher as :meth:`Job.wait
<django_rqueue.job.Job.wait>` waits for a job: no polling).
"""

from __future__ import annotations

import datetime
import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async

from ..conf import get_config
from ..encryption import sealed, unseal
from ..engine import commands, run
from ..engine.connection import as_text, ms_to_datetime, redis_errors
from ..engine.fields import WorkflowFields
from ..engine.keys import finisher_id, queue_of
from ..engine.queue_ref import queue_ref
from ..engine.workflow_record import RecordState
from ..exceptions import JobStateError
from ..job import Job, JobStatus
from ..serialization import loads
from . import control


class WorkflowState(enum.StrEnum):
    """Where a workflow is: ``running`` until every node has ended (after its retries),
    then ``succeeded`` (every node succeeded), ``failed`` (a node failed, or did not run
    because of a failure or a dependency timeout) or ``cancelled`` (``cancel()``)."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


#: How each record state shows: being created, cancelled or re-armed is still running.
_SHOWN = {
    RecordState.CREATING: WorkflowState.RUNNING,
    RecordState.RUNNING: WorkflowState.RUNNING,
    RecordState.CANCELLING: WorkflowState.RUNNING,
    RecordState.REOPENING: WorkflowState.RUNNING,
    RecordState.SUCCEEDED: WorkflowState.SUCCEEDED,
    RecordState.FAILED: WorkflowState.FAILED,
    RecordState.CANCELLED: WorkflowState.CANCELLED,
}


@dataclass
class Workflow:
    """One workflow, as last read from Redis (:meth:`refresh` reads it again).

    Times are aware UTC datetimes (Redis server clock). :attr:`jobs` are read when
    first used, then kept until :meth:`refresh`. ``problems`` lists what could not be
    decoded from a corrupt record (the rest is filled in).
    """

    id: str
    state: WorkflowState
    #: The job name of its last node (what the admin calls it).
    name: str = ""
    #: The ids of its nodes, in the order they were declared (callbacks not included).
    node_ids: list[str] = field(default_factory=list)
    created_at: datetime.datetime | None = None
    finished_at: datetime.datetime | None = None
    #: ``cancel()`` was asked while it ran; its nodes are still ending.
    cancel_requested: bool = False
    #: How many times it finished before (``retry_failed()`` adds one).
    generation: int = 0
    #: The finisher ended other than by running (cancelled, deleted, failed for good):
    #: the workflow ended ``failed``, without a result and without its callbacks.
    finisher_lost: bool = False
    problems: list[str] = field(default_factory=list)
    _result: bytes | str | None = field(default=None, repr=False)
    _jobs: list[Job[Any]] | None = field(default=None, repr=False)

    @classmethod
    def from_fields(
        cls, workflow_id: str, fields: Mapping[bytes, bytes] | Mapping[str, str]
    ) -> Workflow:
        """Build a Workflow from its record (``HGETALL``); never raises on corrupt data."""
        f = {as_text(k): v for k, v in fields.items()}
        problems: list[str] = []
        raw_state = as_text(f.get(WorkflowFields.STATE))
        try:
            record_state = RecordState(raw_state)
        except ValueError:
            problems.append(f"unknown state {raw_state!r}")
            record_state = RecordState.FAILED
        workflow = cls(
            id=workflow_id,
            state=_SHOWN[record_state],
            name=as_text(f.get(WorkflowFields.NAME)),
            created_at=ms_to_datetime(f.get(WorkflowFields.CREATED_AT)),
            finished_at=ms_to_datetime(f.get(WorkflowFields.FINISHED_AT)),
            cancel_requested=record_state is RecordState.CANCELLING,
            finisher_lost=as_text(f.get(WorkflowFields.LOST)) == "1",
            problems=problems,
            _result=f.get(WorkflowFields.RESULT),
        )
        try:
            workflow.generation = int(f.get(WorkflowFields.GENERATION) or 0)
        except ValueError:
            problems.append("generation is not a number")
        try:
            workflow.node_ids = node_ids_of(f.get(WorkflowFields.SPEC))
        except ValueError as exc:
            problems.append(f"undecodable spec: {exc}")
        return workflow

    @property
    def result(self) -> Any:
        """The workflow's result once it succeeded (``None`` before, and after a failure):
        a chain's last node's result, a group's list in member order, a chord's body's.

        Raises:
            ValueError: the stored result cannot be decoded (encrypted with a key no longer
                in ``RQUEUE["ENCRYPTION_KEYS"]``, or corrupt).
        """
        raw = self._result
        if raw is None or raw in (b"", ""):
            return None
        if sealed(raw):
            try:
                raw = unseal(raw)
            except ValueError as exc:
                raise ValueError(str(exc).format(what="results")) from None
        return loads(raw)

    @property
    def jobs(self) -> list[Job[Any]]:
        """Every node, in the order declared (read in one pipeline per queue, then kept
        until :meth:`refresh`). A node whose record is gone (it expired after it ended)
        is a :class:`~django_rqueue.job.Job` holding only its id, its name and
        ``problems == ["record expired"]``, its status that of the workflow's end.

        Raises:
            RedisUnavailable: Redis cannot be reached.
        """
        if self._jobs is None:
            self._jobs = self._read_jobs()
        return self._jobs

    def _read_jobs(self) -> list[Job[Any]]:
        by_queue: dict[str, list[int]] = {}
        for i, job_id in enumerate(self.node_ids):
            by_queue.setdefault(queue_of(job_id) or "", []).append(i)
        found: list[Job[Any] | None] = [None] * len(self.node_ids)
        declared = get_config().queues
        for queue, indices in by_queue.items():
            if queue not in declared:
                continue
            ref = queue_ref(queue)
            client = ref.client()
            with redis_errors(client):
                pipe = client.pipeline(transaction=False)
                for i in indices:
                    pipe.hgetall(ref.keys.job(self.node_ids[i]))
                replies = pipe.execute()
            for i, fields in zip(indices, replies, strict=True):
                if fields:
                    found[i] = Job.from_fields(self.node_ids[i], fields)
        return [
            job if job is not None else self._expired_node(job_id)
            for job_id, job in zip(self.node_ids, found, strict=True)
        ]

    def _expired_node(self, job_id: str) -> Job[Any]:
        status = {
            WorkflowState.SUCCEEDED: JobStatus.SUCCEEDED,
            WorkflowState.CANCELLED: JobStatus.CANCELLED,
        }.get(self.state, JobStatus.FAILED)
        return Job(
            id=job_id,
            name="",
            queue=queue_of(job_id) or "",
            status=status,
            problems=["record expired"],
        )

    def refresh(self) -> None:
        """Read the workflow again (its nodes are read again when :attr:`jobs` is next used).

        Raises:
            JobStateError: the record no longer exists (it expired after the workflow ended).
            RedisUnavailable: Redis cannot be reached.
        """
        fresh = get_workflow(self.id)
        if fresh is None:
            raise JobStateError(f"workflow {self.id} no longer exists", None)
        self.__dict__.update(fresh.__dict__)

    def wait(self, timeout: float) -> Workflow:
        """Block until the workflow has ended; return it, refreshed.

        No polling: this waits for its finisher job as :meth:`Job.wait
        <django_rqueue.job.Job.wait>` does, then reads the record.

        Raises:
            TimeoutError: still running after ``timeout`` seconds.
            ValueError: ``timeout`` is not a number >= 0.
            JobStateError: the record no longer exists.
            RedisUnavailable: Redis cannot be reached.
        """
        if self.state is WorkflowState.RUNNING:
            try:
                self._finisher().wait(timeout)
            except TimeoutError:
                raise TimeoutError(
                    f"workflow {self.id} is still running after {timeout} s"
                ) from None
            except JobStateError:
                pass  # the finisher's record is gone: it ended; the record says how
        self.refresh()
        return self

    async def await_(self, timeout: float) -> Workflow:
        """:meth:`wait` for async code (``await workflow.await_(60)``), without blocking
        the event loop. Raises what :meth:`wait` raises."""
        if self.state is WorkflowState.RUNNING:
            try:
                await self._finisher().await_(timeout)
            except TimeoutError:
                raise TimeoutError(
                    f"workflow {self.id} is still running after {timeout} s"
                ) from None
            except JobStateError:
                pass
        await sync_to_async(self.refresh, thread_sensitive=False)()
        return self

    def cancel(self) -> None:
        """Cancel the workflow: every node that has not ended ends ``cancelled`` with
        ``cancel_reason`` ``workflow_cancelled`` (a running node is stopped by its worker, as
        by ``Job.cancel()``); the workflow then ends ``cancelled``, its ``on_complete``
        callback runs and ``workflow_finished`` is sent. Returns at once (the state shows
        ``running``, :attr:`cancel_requested` true, until every node has ended); calling it
        again completes an interrupted cancel.

        Raises:
            WorkflowStateError: the workflow has finished, or its record is gone.
            RedisUnavailable: Redis cannot be reached.
        """
        control.cancel(self.id)
        self.cancel_requested = True

    def retry_failed(self) -> None:
        """Re-run the failed nodes of a workflow that ended ``failed``, and re-arm the nodes
        they cancelled (``dependency_failed``) and the finisher; a node that succeeded is
        never re-run. The workflow is ``running`` again until every node has ended; calling
        it again completes an interrupted retry.

        Raises:
            WorkflowStateError: the workflow is running, succeeded or was cancelled, its
                record is gone, or records it needs have expired (the message names them).
            RedisUnavailable: Redis cannot be reached.
        """
        control.retry_failed(self.id)
        self.state = WorkflowState.RUNNING

    def _finisher(self) -> Job[Any]:
        finisher = finisher_id(self.id)
        return Job(id=finisher, name="", queue=queue_of(finisher) or "", status=JobStatus.WAITING)


def node_ids_of(spec: bytes | str | None) -> list[str]:
    """The node ids a record's ``spec`` lists, in declared order (``[]`` when absent).

    Raises:
        ValueError: the spec is not JSON of the expected shape.
    """
    if spec is None:
        return []
    data = json.loads(spec)
    nodes = data.get("nodes") if isinstance(data, dict) else None
    if not isinstance(nodes, list) or not all(
        isinstance(n, list) and n and isinstance(n[0], str) for n in nodes
    ):
        raise ValueError("no list of nodes")
    return [n[0] for n in nodes]


def get_workflow(workflow_id: str) -> Workflow | None:
    """Return the workflow with id ``workflow_id`` from any process, or ``None`` when it
    is unknown (never created, rolled back, or its record expired after it ended). Under
    ``RQUEUE["EAGER"]`` a workflow is never written to Redis, so this returns ``None`` for it:
    keep the handle its ``.delay()`` returned.

    The home queue is read from the id (``"<queue>:<random part>"``, as a job's), so one
    ``HGETALL`` suffices; an id of the wrong shape or of an undeclared queue is ``None``.

    Raises:
        TypeError: ``workflow_id`` is not a str.
        RedisUnavailable: Redis cannot be reached.
    """
    if not isinstance(workflow_id, str):
        raise TypeError(f"workflow id must be a str, not {type(workflow_id).__name__}")
    queue = queue_of(workflow_id)
    if queue is None or queue not in get_config().queues:
        return None
    ref = queue_ref(queue)
    fields = run.execute(ref.client(), commands.read_hash(ref.keys.workflow(workflow_id)))
    if not fields:
        return None
    return Workflow.from_fields(workflow_id, fields)
