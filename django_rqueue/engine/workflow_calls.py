"""The calls of whole-workflow operations (``wf_cancel.lua``, ``wf_rearm.lua``): commands, replies.

``Workflow.cancel()`` and ``Workflow.retry_failed()``
(:mod:`django_rqueue.workflows.control`) change a workflow's record with
:mod:`~django_rqueue.engine.workflow_record`, then its nodes with these scripts, one call
per queue and batch of nodes. Each call is idempotent by the state checks of its script,
so an operation interrupted half-way is completed by running it again. Like
:mod:`~django_rqueue.engine.commands`, nothing here does I/O: the executors of
:mod:`~django_rqueue.engine.run` send these commands.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, NamedTuple

from .calls import Arg, ScriptCall
from .commands import Command
from .keys import QueueKeys
from .replies import Reply, items, number, text


class Cancelled(NamedTuple):
    """``wf_cancel.lua``'s reply."""

    #: Nodes that were waiting, scheduled or queued, cancelled now.
    cancelled: int
    #: Running nodes asked to stop (their masters end them).
    requested: int


def _cancelled(reply: Reply) -> Cancelled:
    got = items(reply)
    return Cancelled(number(got[0]), number(got[1]))


def wf_cancel(keys: QueueKeys, node_ids: Sequence[str], ttl: int) -> Command[Cancelled]:
    """Cancel the nodes ``node_ids`` of ``keys``'s queue for ``Workflow.cancel()``
    (``wf_cancel.lua``): a waiting, scheduled or queued node ends ``cancelled`` with
    ``cancel_reason`` ``workflow_cancelled`` (its record kept for its own result TTL, else
    ``ttl`` s, > 0), a running one is asked to stop (``cx`` and ``cxw``); an ended one is
    left alone.

    Raises:
        ValueError: ``ttl`` is not > 0.
    """
    if ttl <= 0:
        raise ValueError(f"a cancelled record is kept > 0 s, not {ttl}")
    call = ScriptCall(
        "wf_cancel",
        [keys.base, keys.delayed, keys.failed, keys.prios, keys.stats],
        [ttl, *node_ids],
    )
    return Command(call, _cancelled)


#: A :class:`Rearm` step: ``arm`` a node a failure cancelled, a failed node whose inputs
#: run again, or the finisher, back to ``waiting``; ``requeue`` a failed node.
RearmOp = Literal["arm", "requeue"]


class Rearm(NamedTuple):
    """One item of a ``wf_rearm.lua`` call."""

    op: RearmOp
    job_id: str
    #: The node's fencing token when the retry was planned: the item applies only while the
    #: node still has it (a replay finds it bumped, and skips).
    token: int
    #: ``arm``: ``(input index k, token T)`` pairs: the tombstone ``r<T>`` written in the
    #: node's field ``i:<k>`` (an outcome of input ``k`` counts only with a token > T).
    tombstones: tuple[tuple[int, int], ...] = ()


def _rearmed(reply: Reply) -> list[bool]:
    return [text(item) == "done" for item in items(reply)]


def wf_rearm(keys: QueueKeys, deadline_ms: int, steps: Sequence[Rearm]) -> Command[list[bool]]:
    """One step of ``Workflow.retry_failed()`` on nodes of ``keys``'s queue
    (``wf_rearm.lua``): per item, whether it was applied (``False``: the node was not in
    the state the item expects, or no longer has its token: done already, or moved on).

    ``deadline_ms``: a re-armed node's dependency deadline, ms from now (-1: none; the
    finisher never has one). ``arm`` writes the tombstones, counts the inputs they replace
    missing again, and makes the node ``waiting`` with its token + 1; ``requeue`` queues a
    failed node with a fresh attempt budget and its token + 1.
    """
    args: list[Arg] = [deadline_ms]
    for step in steps:
        args += (step.op, step.job_id, step.token, len(step.tombstones))
        for k, token in step.tombstones:
            args += (k, token)
    call = ScriptCall(
        "wf_rearm", [keys.base, keys.failed, keys.prios, keys.stats, keys.notify], args
    )
    return Command(call, _rearmed)
