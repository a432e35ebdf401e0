"""The calls of the dependency transitions: one builder per script that creates, links or
settles jobs that wait for others (``wf_nodes.lua``, ``dep_apply.lua``, ``dep_link.lua``).

The twin of :mod:`~django_rqueue.engine.calls` for the scripts of workflows and
``depends_on`` (kept apart so that each module keeps one job): each builder returns the
``KEYS`` and ``ARGV`` of one call, in the order of its script's header. The replies are
read by :mod:`~django_rqueue.engine.dependency_replies`, and
:mod:`~django_rqueue.engine.dependency_commands` pairs them. Durations are milliseconds
on the Redis clock. The wire format of edge entries and arrival values is
:mod:`django_rqueue.dependencies`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final, Literal, NamedTuple, Protocol

from .calls import Arg, ScriptCall
from .keys import QueueKeys

#: ``wf_nodes.lua``'s mode: ``"live"`` queues (or schedules) the sources at once; ``"gated"``
#: makes every source wait for its gate (input ``0``) until :func:`dep_apply` opens it.
NodesMode = Literal["live", "gated"]

#: The instruction, in a node's field pairs, that marks a source (read by ``wf_nodes.lua``,
#: never stored).
SOURCE: Final = "src"


class NodeSpec(Protocol):
    """What :func:`wf_nodes` reads of a node (:class:`Node`, or a workflow's compiled
    :class:`~django_rqueue.workflows.nodes.NodePlan`)."""

    @property
    def job_id(self) -> str: ...
    @property
    def priority(self) -> int: ...
    @property
    def group(self) -> str: ...
    @property
    def delay_ms(self) -> int: ...
    @property
    def run_at_ms(self) -> int: ...
    @property
    def fields(self) -> Mapping[str, str | int]: ...
    @property
    def source(self) -> bool: ...


class Node(NamedTuple):
    """One node of a :func:`wf_nodes` batch: a job to create, waiting or not."""

    job_id: str
    #: -100..100.
    priority: int
    #: ``""``: the default group.
    group: str
    #: For a node that does not wait: ms from now before it runs (a waiting node's delay,
    #: counted from its release, is its field ``rd``).
    delay_ms: int
    #: Run-at in ms since the epoch (UTC), or -1.
    run_at_ms: int
    #: Job-hash fields copied into the record (``n``, ``p``, the options not at their
    #: defaults, and those of :class:`~.fields.JobFields` for dependencies: ``wf``, ``nx``,
    #: ``dn``, ``di``, ``dp``, ``dr``, ``rd``); ``dn`` > 0 makes the node wait.
    fields: Mapping[str, str | int]
    #: A node without an input inside its workflow: in mode ``"gated"`` it waits for its gate.
    source: bool = False


def wf_nodes(
    keys: QueueKeys,
    nodes: Iterable[NodeSpec],
    *,
    mode: NodesMode,
    deadline_ms: int,
    grace_ms: int = -1,
) -> ScriptCall:
    """``wf_nodes.lua``: create ``nodes`` (one batch, of ``keys``'s queue).

    ``deadline_ms``: the waiting nodes' dependency deadline, ms from now (-1: none);
    ``grace_ms``: how long a gated source waits for its gate before the poller's sweep may
    remove it (-1: until its dependency deadline).
    """
    args: list[Arg] = [mode, deadline_ms, grace_ms]
    for node in nodes:
        pairs: list[Arg] = []
        for name, value in node.fields.items():
            pairs += (name, value)
        if node.source:
            pairs += (SOURCE, 1)
        args += (node.job_id, node.priority, node.group, node.delay_ms, node.run_at_ms)
        args.append(len(pairs) // 2)
        args += pairs
    return ScriptCall(
        "wf_nodes",
        [keys.base, keys.prios, keys.delayed, keys.stats, keys.notify, keys.wake, keys.waiting],
        args,
    )


def dep_apply(keys: QueueKeys, triples: Iterable[tuple[str, int, str]]) -> ScriptCall:
    """``dep_apply.lua``: record arrivals ``(dependent id, input index, arrival value)`` on
    waiting jobs of ``keys``'s queue (input ``0``: the gate)."""
    args: list[Arg] = []
    for dependent, index, value in triples:
        args += (dependent, index, value)
    return ScriptCall("dep_apply", [keys.base], args)


def dep_link(keys: QueueKeys, job_id: str, entry: str, *, same_queue: bool) -> ScriptCall:
    """``dep_link.lua``: link the dependent of the edge ``entry``
    (:meth:`django_rqueue.dependencies.Edge.encode`) to the existing job ``job_id`` of
    ``keys``'s queue; ``same_queue``: the dependent is on that queue too (it is settled at
    once when the job has ended)."""
    return ScriptCall(
        "dep_link", [keys.base, keys.job(job_id)], [job_id, entry, 1 if same_queue else 0]
    )


# -- the dependency deadline (waiting_sweep.lua) ---------------------------------------------


def waiting_sweep(keys: QueueKeys, limit: int) -> ScriptCall:
    """``waiting_sweep.lua``: end at most ``limit`` (> 0) waiting jobs of ``keys``'s queue
    whose dependency deadline has passed (Redis clock)."""
    return ScriptCall("waiting_sweep", [keys.base, keys.waiting, keys.stats], [limit])
