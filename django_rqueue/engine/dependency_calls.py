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
from .fields import JobFields
from .keys import QueueKeys

#: ``wf_nodes.lua``'s mode: ``"live"`` queues (or schedules) the sources at once; ``"gated"``
#: makes every source wait for its gate (input ``0``) until :func:`dep_apply` opens it.
NodesMode = Literal["live", "gated"]

#: The instructions among a node's pairs in ``wf_nodes.lua``'s ARGV (read by the script; an
#: absent one has its default): a source (``1``), its priority (0), group (``""``), delay in
#: ms (0) and run-at in ms since the epoch (-1). ``prio`` and ``group`` are stored under the
#: same names when not at their defaults.
SOURCE: Final = "src"
PRIORITY: Final = "prio"
GROUP: Final = "group"
DELAY: Final = "delay"
RUN_AT: Final = "runat"


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
    own = [_pairs(node) for node in nodes]
    shared = _shared(own)
    args: list[Arg] = [mode, deadline_ms, grace_ms, len(shared)]
    for name, value in shared.items():
        args += (name, value)
    for node, pairs in zip(nodes, own, strict=True):
        flat: list[Arg] = []
        for name, value in pairs.items():
            if name not in shared:
                flat += (name, value)
        args += (node.job_id, len(flat) // 2)
        args += flat
    return ScriptCall(
        "wf_nodes",
        [keys.base, keys.prios, keys.delayed, keys.stats, keys.notify, keys.wake, keys.waiting],
        args,
    )


def _pairs(node: NodeSpec) -> dict[str, str | int]:
    """A node's pairs in ``wf_nodes.lua``'s ARGV: its fields, then the instructions whose
    value is not their default."""
    pairs = dict(node.fields)
    if node.priority:
        pairs[PRIORITY] = node.priority
    if node.group:
        pairs[GROUP] = node.group
    if node.delay_ms:
        pairs[DELAY] = node.delay_ms
    if node.run_at_ms != -1:
        pairs[RUN_AT] = node.run_at_ms
    if node.source:
        pairs[SOURCE] = 1
    return pairs


def _shared(own: list[dict[str, str | int]]) -> dict[str, str | int]:
    """The pairs every node of a batch has, the payload excepted: sent once per batch (a
    10 000-member group then sends its job name, workflow id and options once per batch)."""
    if len(own) < 2:
        return {}
    shared = {k: v for k, v in own[0].items() if k != JobFields.PAYLOAD}
    for pairs in own[1:]:
        for name, value in list(shared.items()):
            if pairs.get(name) != value:
                del shared[name]
        if not shared:
            break
    return shared


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
