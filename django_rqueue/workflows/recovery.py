"""Finish or undo the staged creations whose creator stalled (a queue's ``wfopen``).

A staged creation (:mod:`.staged`) keeps its workflow in the home queue's ``wfopen``
zset, scored by a deadline (Redis clock, ms), until its last step. The pollers call
:func:`sweep_opening` for each of their queues; a creation past its deadline is:

- ``creating`` (not committed): rolled **back**. ``wf_record abort`` first, so that a slow
  creator's later commit finds nothing (``gone``) and removes what it wrote itself; then
  the finisher and the nodes are deleted, the finisher first and the nodes in reverse
  declared order (dependents before their inputs, so no deletion releases a node whose
  inputs were all deleted). Nothing of it had run: its sources were gated.
- ``running`` (committed): rolled **forward**: the gates opened (again: idempotent), and
  the creation leaves ``wfopen``.

- ``reopening``: a ``retry_failed()`` whose caller stalled is completed (its stored plan
  replayed: every step is idempotent, :func:`.control.retry_failed`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from typing import Final

from ..conf import get_config
from ..engine import commands, run, workflow_record
from ..engine.connection import as_text, get_client, redis_errors
from ..engine.fields import WorkflowFields
from ..engine.keys import QueueKeys, finisher_id
from ..engine.workflow_record import RecordState
from ..exceptions import WorkflowStateError
from . import control
from .handle import node_ids_of
from .staged import delete_jobs, open_gates

logger = logging.getLogger("django_rqueue.poller")

#: Creations one :func:`sweep_opening` call looks at, at most.
SWEEP_LIMIT: Final = 100


def sweep_opening(queue: str, limit: int = SWEEP_LIMIT) -> int:
    """Roll back or forward the creations of ``queue``'s ``wfopen`` past their deadline;
    return how many were handled (at most ``limit``).

    Raises:
        RedisUnavailable: Redis cannot be reached (the next sweep goes on).
    """
    prefix = get_config().key_prefix
    keys = QueueKeys.of(prefix, queue)
    client = get_client(queue)
    with redis_errors(client):
        seconds, micros = client.time()
        now_ms = seconds * 1000 + micros // 1000
        # ZRANGE ... BYSCORE (Redis 6.2+): the least-privilege user is granted ZRANGE, not
        # ZRANGEBYSCORE (engine/permissions.py).
        due: list[bytes] = client.zrange(  # type: ignore[assignment]
            keys.opening, "-inf", now_ms, byscore=True, offset=0, num=limit
        )
    handled = 0
    for raw_id in due:
        workflow_id = as_text(raw_id)
        fields = run.execute(client, commands.read_hash(keys.workflow(workflow_id)))
        record = {as_text(k): v for k, v in fields.items()}
        state = as_text(record.get(WorkflowFields.STATE))
        try:
            node_ids = node_ids_of(record.get(WorkflowFields.SPEC))
            edges = _edges(record.get(WorkflowFields.SPEC))
        except ValueError:
            node_ids, edges = [], []
        if not record:
            run.execute(client, workflow_record.opened(keys, workflow_id))  # an orphan entry
        elif state == RecordState.CREATING:
            reply = run.execute(client, workflow_record.abort(keys, workflow_id))
            if reply.outcome == "state":  # committed meanwhile: forward
                roll_forward(prefix, queue, workflow_id, node_ids, edges)
            else:
                delete_jobs(prefix, [finisher_id(workflow_id), *reversed(node_ids)])
        elif state == RecordState.RUNNING:
            roll_forward(prefix, queue, workflow_id, node_ids, edges)
        elif state == RecordState.REOPENING:
            try:
                control.retry_failed(workflow_id)
            except WorkflowStateError as exc:  # its records expired meanwhile: say so
                logger.error("workflow %s: could not complete retry_failed(): %s", workflow_id, exc)
                continue
        else:
            continue
        handled += 1
    return handled


def roll_forward(
    prefix: str,
    queue: str,
    workflow_id: str,
    node_ids: Sequence[str],
    edges: Iterable[tuple[int, int]],
) -> None:
    """Open every gate of a committed creation (the sources', or the finisher's when it
    has no node), then take it out of ``wfopen``."""
    targets = {to for _, to in edges}
    gated = [i for index, i in enumerate(node_ids) if index not in targets]
    if not node_ids:
        gated = [finisher_id(workflow_id)]
    open_gates(prefix, gated)
    keys = QueueKeys.of(prefix, queue)
    run.execute(get_client(queue), workflow_record.opened(keys, workflow_id))


def _edges(spec: bytes | str | None) -> list[tuple[int, int]]:
    """The ``edges`` of a record's ``spec`` (``[]`` when absent).

    Raises:
        ValueError: not JSON of the expected shape.
    """
    if spec is None:
        return []
    data = json.loads(spec)
    edges = data.get("edges", []) if isinstance(data, dict) else None
    if not isinstance(edges, list):
        raise ValueError("no list of edges")
    return [(int(a), int(b)) for a, b in edges]
