"""The compiled plan of a workflow (:class:`WorkflowPlan`): its jobs, links and script calls.

:func:`django_rqueue.workflows.graph.compile` builds it, validated and encoded; the
creation writes it: :meth:`WorkflowPlan.batches` gives the ``wf_nodes.lua`` calls per
queue, :attr:`WorkflowPlan.links`
the ``dep_link.lua`` calls, :attr:`WorkflowPlan.record` the record's fields. Pure data.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any, Final, Literal, NamedTuple

from ..engine.calls import Arg, ScriptCall
from ..engine.dependency_calls import NodesMode, wf_nodes
from ..engine.keys import QueueKeys, queue_of
from ..enqueue.plan import Plan
from .shapes import Tree

#: Most nodes a ``live`` creation writes in its one ``MULTI`` (the ``EXEC`` holds Redis
#: for its whole length); a larger workflow is created ``staged``.
ATOMIC_MAX_NODES: Final = 20_000
#: Most nodes of one ``wf_nodes.lua`` call.
BATCH_NODES: Final = 500
#: The finisher's job name (the reserved prefix ``rqueue:``).
FINISHER_NAME: Final = "rqueue:workflow.finish"
#: Attempts of the finisher.
FINISHER_MAX_ATTEMPTS: Final = 10
#: How a workflow is written: one ``MULTI`` (one location), or gated nodes behind a commit.
CreationPath = Literal["live", "staged"]


@dataclasses.dataclass(slots=True)
class NodePlan:
    """One job of the workflow as ``wf_nodes.lua`` writes it (a node, or the finisher).

    Not frozen, though nothing changes it: a compile makes one per node, and a frozen
    dataclass's ``__init__`` (one ``object.__setattr__`` per field) takes three times as long.
    """

    #: Declared order, from 0 (the finisher: the number of nodes).
    index: int
    id: str
    name: str
    queue: str
    priority: int
    group: str
    #: Milliseconds from the creation; only on a job without inputs (a job with inputs
    #: counts its ``delay`` from its release: the field ``rd``, ``JobFields.RELEASE_DELAY``).
    delay_ms: int
    #: Milliseconds since the epoch (UTC), or -1.
    run_at_ms: int
    #: No input inside the workflow (``src 1``; gated on the staged path).
    source: bool
    #: The ids of its inputs in index order (inside the workflow, then ``depends_on``).
    input_ids: tuple[str, ...]
    #: Its job-hash fields (the record of ``.delay()``, ``p``, ``wf``, ``nx``, ``dn``, ...).
    fields: Mapping[str, str | int]
    #: The resolved options (``None`` for the finisher).
    plan: Plan | None = None
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def job_id(self) -> str:
        """The node's ``id``, under the name
        :func:`~django_rqueue.engine.dependency_calls.wf_nodes` reads."""
        return self.id


class Link(NamedTuple):
    """An edge from a job outside the workflow (``using(depends_on=...)`` on a node), written
    with ``dep_link.lua`` on the parent's queue."""

    parent: str
    dependent: str
    #: The dependent's input index.
    input_index: int
    #: The edge entry (``dep_link.lua``'s ``ARGV[2]``).
    entry: str
    #: ``dep_link.lua``'s ``ARGV[3]``: the dependent is on the parent's queue (and the
    #: outbox is not forced), so an ended parent is settled in the same call.
    here: bool

    @property
    def parent_queue(self) -> str:
        return queue_of(self.parent) or ""


class NodeBatch(NamedTuple):
    """One ``wf_nodes.lua`` call and its queue."""

    queue: str
    call: ScriptCall


@dataclasses.dataclass(frozen=True)
class WorkflowPlan:
    """Everything a workflow's creation writes, validated and encoded."""

    #: ``"<home queue>:<22 characters>"``.
    id: str
    #: The queue of the record and the finisher.
    home: str
    #: The declared nodes, in declared order.
    nodes: tuple[NodePlan, ...]
    #: The finisher job: it waits for every node, then ends the record.
    finisher: NodePlan
    #: ``(from, to)`` node indices.
    edges: tuple[tuple[int, int], ...]
    #: The nodes' inputs from outside the workflow (``depends_on``): one ``dep_link.lua``
    #: call each.
    links: tuple[Link, ...]
    #: The workflow's result, as a tree of node indices.
    shape: Tree
    #: The record's fields (``wf_record.lua``): ``n``, ``name``, ``spec``, ``gen`` and, when
    #: set, ``cb``, ``dto``.
    record: Mapping[str, Arg]
    #: ``live``: one ``MULTI``; ``staged``: gated nodes behind a commit point.
    path: CreationPath
    #: Milliseconds a waiting node waits at most (``wf_nodes.lua``'s ``ARGV[2]``); -1: no limit.
    deadline_ms: int
    #: The queues of each location the workflow touches (one slot each under Cluster).
    places: tuple[tuple[str, ...], ...]
    #: ``RQUEUE["KEY_PREFIX"]`` when it was compiled.
    key_prefix: str

    @property
    def queues(self) -> tuple[str, ...]:
        """Every queue written, in order of first appearance (the home queue last if new)."""
        seen = dict.fromkeys(n.queue for n in self.nodes)
        seen.setdefault(self.home)
        return tuple(seen)

    @property
    def gated(self) -> tuple[NodePlan, ...]:
        """The jobs a staged creation gates (sources, the finisher of an empty workflow):
        their gates (input 0) are opened after the commit."""
        return tuple(n for n in (*self.nodes, self.finisher) if n.source)

    def batches(self, size: int = BATCH_NODES) -> Iterator[NodeBatch]:
        """The ``wf_nodes.lua`` calls (:func:`~django_rqueue.engine.dependency_calls.wf_nodes`,
        mode ``live`` or ``gated`` as :attr:`path` says): per queue (:attr:`queues` order), its
        nodes in declared order, at most ``size`` per call; the finisher last, alone, with no
        deadline (it waits for every node, however long they run)."""
        mode: NodesMode = "live" if self.path == "live" else "gated"
        by_queue: dict[str, list[NodePlan]] = {q: [] for q in self.queues}
        for node in self.nodes:
            by_queue[node.queue].append(node)
        for queue, nodes in by_queue.items():
            keys = QueueKeys.of(self.key_prefix, queue)
            for start in range(0, len(nodes), size):
                batch = nodes[start : start + size]
                call = wf_nodes(keys, batch, mode=mode, deadline_ms=self.deadline_ms)
                yield NodeBatch(queue, call)
        keys = QueueKeys.of(self.key_prefix, self.home)
        yield NodeBatch(self.home, wf_nodes(keys, [self.finisher], mode=mode, deadline_ms=-1))
