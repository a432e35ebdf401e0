"""The dependency transitions as values: each script call of
:mod:`~django_rqueue.engine.dependency_calls` paired with its parser of
:mod:`~django_rqueue.engine.dependency_replies` (pure).

The twin of :mod:`~django_rqueue.engine.commands` (whose :class:`~.commands.Command` they
are) for the scripts of workflows and ``depends_on``; the executors of
:mod:`~django_rqueue.engine.run` send them. Each command takes its builder's arguments.
"""

from __future__ import annotations

from collections.abc import Iterable

from . import dependency_calls, dependency_replies
from .commands import Command
from .dependency_calls import NodesMode, NodeSpec
from .dependency_replies import Applied, Linked, Swept
from .keys import QueueKeys


def wf_nodes(
    keys: QueueKeys,
    nodes: Iterable[NodeSpec],
    *,
    mode: NodesMode,
    deadline_ms: int,
    grace_ms: int = -1,
) -> Command[list[tuple[int, str]]]:
    """Create one batch of nodes (``wf_nodes.lua``, :func:`.dependency_calls.wf_nodes`): the
    ``(index, outcome)`` of each node not created (:func:`.dependency_replies.nodes_refused`)."""
    call = dependency_calls.wf_nodes(
        keys, nodes, mode=mode, deadline_ms=deadline_ms, grace_ms=grace_ms
    )
    return Command(call, dependency_replies.nodes_refused)


def dep_apply(keys: QueueKeys, triples: Iterable[tuple[str, int, str]]) -> Command[Applied]:
    """Record arrivals on waiting jobs of one queue (``dep_apply.lua``,
    :func:`.dependency_calls.dep_apply`): :class:`~.dependency_replies.Applied`."""
    return Command(dependency_calls.dep_apply(keys, triples), dependency_replies.dep_applied)


def dep_link(keys: QueueKeys, job_id: str, entry: str, *, same_queue: bool) -> Command[Linked]:
    """Link a dependent to the existing job ``job_id`` (``dep_link.lua``,
    :func:`.dependency_calls.dep_link`): :class:`~.dependency_replies.Linked`."""
    call = dependency_calls.dep_link(keys, job_id, entry, same_queue=same_queue)
    return Command(call, dependency_replies.linked)


# -- the dependency deadline (waiting_sweep.lua) ---------------------------------------------


def waiting_sweep(keys: QueueKeys, limit: int) -> Command[Swept]:
    """End the waiting jobs past their dependency deadline (``waiting_sweep.lua``,
    :func:`.dependency_calls.waiting_sweep`): :class:`~.dependency_replies.Swept`."""
    return Command(dependency_calls.waiting_sweep(keys, limit), dependency_replies.swept)
