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
from typing import NamedTuple

from .calls import ScriptCall
from .commands import Command
from .keys import QueueKeys
from .replies import Reply, items, number


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
    ``cancel_reason`` ``workflow_cancelled`` (its record kept ``ttl`` s, > 0), a running
    one is asked to stop (``cx`` and ``cxw``); an ended one is left alone.

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
