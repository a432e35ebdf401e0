"""Reads of workflows for the admin: a page of a queue's workflows, one workflow's record,
the states of a bounded set of its jobs, and the record of a job with many inputs.

Every function here costs a bounded number of round trips whatever the size of the queue
or of the workflow: a page is one ``ZREVRANGE`` of the home queue's ``wfs`` zset and one
pipeline of two ``HMGET`` per row (the record's small fields, the finisher's counts); the
jobs of a workflow are read with one ``HMGET`` of a few small fields each, pipelined per
queue, for the ids the caller asks (the admin asks at most its page of nodes). Nothing
here reads the whole hash of a job with many inputs (a chord body's hash holds one arrival
per input: :func:`read_job` reads only the first ones) or uses ``KEYS`` or ``SCAN``.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, overload

from ..conf import get_config
from ..engine.connection import as_text, ms_to_datetime, redis_errors
from ..engine.fields import JobFields, WorkflowFields
from ..engine.keys import finisher_id, queue_of
from ..engine.queue_ref import queue_ref
from ..job import CancelReason, JobStatus
from ..record import DEFAULT_MAX_ATTEMPTS, FIELD_NAMES
from ..workflows.handle import Workflow

#: The record's fields a listed row reads (not ``spec``, ``res`` nor ``plan``: they grow
#: with the workflow).
ROW_FIELDS: Final = (
    WorkflowFields.STATE,
    WorkflowFields.CREATED_AT,
    WorkflowFields.FINISHED_AT,
    WorkflowFields.NODE_COUNT,
    WorkflowFields.NAME,
    WorkflowFields.GENERATION,
    WorkflowFields.LOST,
)

#: The job fields :func:`job_states` reads: small ones only (never ``di``, ``p``,
#: ``result``, the arrivals).
STATE_FIELDS: Final = (
    JobFields.STATE,
    JobFields.NAME,
    JobFields.CANCEL_REASON,
    JobFields.ATTEMPTS,
    JobFields.MAX_ATTEMPTS,
    JobFields.STARTED_AT,
    JobFields.FINISHED_AT,
    JobFields.INPUT_COUNT,
    JobFields.INPUTS_MISSING,
    JobFields.INPUTS_FAILED,
    JobFields.INPUTS_CANCELLED,
)


@dataclass(frozen=True, slots=True)
class JobState:
    """A job as :func:`job_states` reads it (a few fields of its hash)."""

    id: str
    name: str
    #: ``None``: a state the record does not hold as one (corrupt).
    status: JobStatus | None
    cancel_reason: CancelReason | str | None = None
    attempts: int = 0
    #: Attempts allowed (the default when the record leaves the field out).
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    started_at: datetime.datetime | None = None
    finished_at: datetime.datetime | None = None
    #: Its inputs (``dn``; ``None``: it has none), not arrived yet (``dw``), failed and
    #: cancelled (``df``, ``dc``; on a finisher, the workflow's nodes).
    inputs: int | None = None
    missing: int = 0
    failed: int = 0
    cancelled: int = 0


@dataclass(frozen=True, slots=True)
class Progress:
    """A workflow's nodes by outcome, from its finisher's counts: ``total`` (``dn``),
    ``ok`` (ended succeeded: ``dn - dw - df - dc``), ``failed``, ``cancelled``, and
    ``pending`` (not ended: ``dw``)."""

    total: int
    ok: int
    failed: int
    cancelled: int
    pending: int

    @classmethod
    def of(cls, finisher: JobState) -> Progress | None:
        """The progress its finisher's counts say (``None``: it has none, corrupt)."""
        if finisher.inputs is None:
            return None
        missing = max(0, finisher.missing)
        ok = max(0, finisher.inputs - missing - finisher.failed - finisher.cancelled)
        return cls(finisher.inputs, ok, finisher.failed, finisher.cancelled, missing)


@dataclass
class WorkflowRow:
    """One listed workflow: its record (``None`` when gone) and its finisher's progress
    (``None`` when the finisher's record is gone)."""

    id: str
    workflow: Workflow | None
    progress: Progress | None
    #: The ``wfs`` score: when it was created.
    created_at: datetime.datetime | None = None


def _int(value: Any, default: int = 0) -> int:  # bytes, str or None
    try:
        return int(as_text(value)) if value is not None else default
    except ValueError:
        return default


def _state_of(job_id: str, values: list[Any]) -> JobState | None:  # an HMGET reply
    fields = dict(zip(STATE_FIELDS, values, strict=True))
    raw_state = fields[JobFields.STATE]
    if raw_state is None:
        return None
    state = as_text(raw_state)
    try:
        status: JobStatus | None = JobStatus(state)
    except ValueError:
        status = None
    reason_text = as_text(fields[JobFields.CANCEL_REASON]) or None
    reason: CancelReason | str | None = reason_text
    if reason_text is not None and reason_text in set(CancelReason):
        reason = CancelReason(reason_text)
    dn = fields[JobFields.INPUT_COUNT]
    return JobState(
        id=job_id,
        name=as_text(fields[JobFields.NAME]),
        status=status,
        cancel_reason=reason,
        attempts=_int(fields[JobFields.ATTEMPTS]),
        max_attempts=_int(fields[JobFields.MAX_ATTEMPTS], DEFAULT_MAX_ATTEMPTS),
        started_at=ms_to_datetime(fields[JobFields.STARTED_AT]),
        finished_at=ms_to_datetime(fields[JobFields.FINISHED_AT]),
        inputs=_int(dn) if dn is not None else None,
        missing=_int(fields[JobFields.INPUTS_MISSING]),
        failed=_int(fields[JobFields.INPUTS_FAILED]),
        cancelled=_int(fields[JobFields.INPUTS_CANCELLED]),
    )


def job_states(job_ids: Iterable[str]) -> dict[str, JobState]:
    """The state of each job of ``job_ids`` whose record exists (one ``HMGET`` of
    :data:`STATE_FIELDS` each, pipelined per queue); ids of undeclared queues, and jobs
    whose record is gone or is not a hash, are left out.

    Raises:
        RedisUnavailable: Redis cannot be reached.
    """
    by_queue: dict[str, list[str]] = {}
    declared = get_config().queues
    for job_id in dict.fromkeys(job_ids):
        queue = queue_of(job_id)
        if queue is not None and queue in declared:
            by_queue.setdefault(queue, []).append(job_id)
    found: dict[str, JobState] = {}
    for queue, ids in by_queue.items():
        ref = queue_ref(queue)
        client = ref.client()
        with redis_errors(client):
            pipe = client.pipeline(transaction=False)
            for job_id in ids:
                pipe.hmget(ref.keys.job(job_id), STATE_FIELDS)
            replies = pipe.execute(raise_on_error=False)
        for job_id, reply in zip(ids, replies, strict=True):
            if isinstance(reply, Exception):
                continue  # not a hash: the job page says why
            state = _state_of(job_id, reply)
            if state is not None:
                found[job_id] = state
    return found


def read_record(workflow_id: str) -> tuple[Workflow, dict[str, bytes]] | None:
    """The workflow ``workflow_id`` and its record's fields (names as text), in one
    ``HGETALL`` of the record (its ``spec`` lists every node: one key, read once);
    ``None`` when unknown (never created, rolled back, expired) or of an undeclared queue.

    Raises:
        RedisUnavailable: Redis cannot be reached.
    """
    queue = queue_of(workflow_id)
    if queue is None or queue not in get_config().queues:
        return None
    ref = queue_ref(queue)
    client = ref.client()
    with redis_errors(client):
        raw: Mapping[bytes, bytes] = client.hgetall(ref.keys.workflow(workflow_id))  # type: ignore[assignment]
    if not raw:
        return None
    fields = {as_text(k): v for k, v in raw.items()}
    return Workflow.from_fields(workflow_id, raw), fields


@dataclass
class WorkflowSource:
    """The workflows whose home is ``queue``, newest first, sliceable for ``Paginator``.

    ``count()`` is one ``ZCARD`` of ``wfs``; a slice is one ``ZREVRANGE`` plus one
    pipeline of two ``HMGET`` per row (:data:`ROW_FIELDS` of the record, the finisher's
    counts).
    """

    queue: str

    def count(self) -> int:
        ref = queue_ref(self.queue)
        client = ref.client()
        with redis_errors(client):
            return int(client.zcard(ref.keys.workflows))

    def __len__(self) -> int:
        return self.count()

    @overload
    def __getitem__(self, index: int) -> WorkflowRow: ...
    @overload
    def __getitem__(self, index: slice) -> list[WorkflowRow]: ...
    def __getitem__(self, index: int | slice) -> WorkflowRow | list[WorkflowRow]:
        if isinstance(index, int):
            return self[index : index + 1][0]
        start, stop = index.start or 0, index.stop
        if stop is None or stop <= start:
            return []
        ref = queue_ref(self.queue)
        client = ref.client()
        with redis_errors(client):
            pairs: list[tuple[bytes, float]] = client.zrevrange(  # type: ignore[assignment]
                ref.keys.workflows, start, stop - 1, withscores=True
            )
        found = {as_text(i): float(s) for i, s in pairs}
        return rows(list(found), found)


def rows(workflow_ids: list[str], created: Mapping[str, float] | None = None) -> list[WorkflowRow]:
    """The rows of ``workflow_ids`` (all of one declared queue: their home), in that order:
    one pipeline of two ``HMGET`` per workflow. ``created`` maps ids to their ``wfs``
    score (ms); without it, a row's time is its record's.

    Raises:
        RedisUnavailable: Redis cannot be reached.
    """
    if not workflow_ids:
        return []
    ref = queue_ref(queue_of(workflow_ids[0]) or "")
    client = ref.client()
    with redis_errors(client):
        pipe = client.pipeline(transaction=False)
        for workflow_id in workflow_ids:
            pipe.hmget(ref.keys.workflow(workflow_id), ROW_FIELDS)
            pipe.hmget(ref.keys.job(finisher_id(workflow_id)), STATE_FIELDS)
        replies = pipe.execute(raise_on_error=False)
    found = []
    for n, workflow_id in enumerate(workflow_ids):
        record, finisher = replies[2 * n], replies[2 * n + 1]
        workflow = None
        if not isinstance(record, Exception) and record[0] is not None:
            workflow = Workflow.from_fields(
                workflow_id,
                {k: v for k, v in zip(ROW_FIELDS, record, strict=True) if v is not None},
            )
        progress = None
        if not isinstance(finisher, Exception):
            state = _state_of(finisher_id(workflow_id), finisher)
            progress = Progress.of(state) if state is not None else None
        score = (created or {}).get(workflow_id)
        at = ms_to_datetime(score) if score is not None else None
        if at is None and workflow is not None:
            at = workflow.created_at
        found.append(WorkflowRow(workflow_id, workflow, progress, at))
    return found


def exists(workflow_id: str) -> bool:
    """Whether the workflow ``workflow_id`` has a record (one ``EXISTS``); ``False`` for an
    id of an undeclared queue.

    Raises:
        RedisUnavailable: Redis cannot be reached.
    """
    queue = queue_of(workflow_id)
    if queue is None or queue not in get_config().queues:
        return False
    ref = queue_ref(queue)
    client = ref.client()
    with redis_errors(client):
        return bool(client.exists(ref.keys.workflow(workflow_id)))


#: A job hash with more fields than this is read by :func:`read_job` without its arrivals
#: past the first ones (a job without inputs never has this many: its error history is two
#: fields per attempt).
LARGE_RECORD: Final = 1000
#: Payload parts a record may hold (``p``, ``p:2`` .. ``p:17``: 1071 bytes in 63-byte parts).
PAYLOAD_PARTS: Final = 17


def read_job(job_id: str, arrivals: int) -> dict[bytes, bytes]:
    """The hash of the job ``job_id`` as ``HGETALL`` gives it (``{}`` when gone), except that
    a hash of more than :data:`LARGE_RECORD` fields (a job with many inputs: one arrival
    each) is read without its arrivals past input ``arrivals``: one ``HLEN``, then two
    ``HMGET`` (every fixed field, then the payload parts, the error history and the
    arrivals ``i:0`` .. ``i:<arrivals>``), whatever the number of inputs.

    Raises:
        redis.ResponseError: the key is not a hash (``WRONGTYPE``).
        RedisUnavailable: Redis cannot be reached.
    """
    queue = queue_of(job_id) or ""
    ref = queue_ref(queue)
    key = ref.keys.job(job_id)
    client = ref.client()
    with redis_errors(client):
        if int(client.hlen(key)) <= LARGE_RECORD:
            whole: dict[bytes, bytes] = client.hgetall(key)  # type: ignore[assignment]
            return whole
        names = list(FIELD_NAMES.values())
        first: list[bytes | None] = client.hmget(key, names)  # type: ignore[assignment]
        found = {n.encode(): v for n, v in zip(names, first, strict=True) if v is not None}
        errors = min(_int(found.get(JobFields.ERROR_COUNT.encode())), LARGE_RECORD // 2)
        more = [JobFields.payload_part(n) for n in range(2, PAYLOAD_PARTS + 1)]
        for n in range(1, errors + 1):
            more += [JobFields.error_part(n), JobFields.error_time_part(n)]
        more += [JobFields.input_part(k) for k in range(arrivals + 1)]
        second: list[bytes | None] = client.hmget(key, more)  # type: ignore[assignment]
    found.update((n.encode(), v) for n, v in zip(more, second, strict=True) if v is not None)
    return found
