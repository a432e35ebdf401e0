"""The layout of a workflow's graph on its admin page: the record's ``spec`` read back, each
node's layer, the layers one page shows, and the points of the small map of links. Pure.

A node's layer is the length of the longest path to it from a source (a node without an
input inside the workflow): a chain is one node per layer, a chord its header in layer 0
and its body in layer 1. A page shows whole layers from a given one, at most
:data:`MAX_NODES` nodes (a first layer larger than that is cut, and says so).
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from typing import Final

#: Most nodes one page of a workflow shows.
MAX_NODES: Final = 500
#: Most nodes shown for which the map of links (an inline SVG) is drawn.
MAX_MAP_NODES: Final = 200
#: The map's geometry (SVG user units): distance between layers, between rows, dot radius.
LAYER_GAP, ROW_GAP, RADIUS = 60, 18, 6


@dataclass(frozen=True)
class Spec:
    """A workflow's shape as its record's ``spec`` holds it (``shapes.spec_json``)."""

    #: ``(id, job name)`` per node, in declared order.
    nodes: tuple[tuple[str, str], ...]
    #: Per node, the indices of its inputs inside the workflow, in index order of the edges.
    inputs: tuple[tuple[int, ...], ...]
    #: Per node, the ids of its inputs from outside the workflow (``depends_on``).
    external: tuple[tuple[str, ...], ...]
    #: The node indices whose results make the workflow's result.
    exits: tuple[int, ...] = ()

    @classmethod
    def parse(cls, raw: bytes | str | None) -> Spec:
        """Read a record's ``spec`` (``None``: a workflow without nodes).

        Raises:
            ValueError: not JSON of the expected shape (an edge naming no node included).
        """
        if raw is None:
            return cls((), (), ())
        try:
            data = json.loads(raw)
            nodes = tuple((str(n[0]), str(n[1]) if len(n) > 1 else "") for n in data["nodes"])
            inputs: list[list[int]] = [[] for _ in nodes]
            for source, target in data.get("edges", []):
                if not (0 <= int(source) < len(nodes) and 0 <= int(target) < len(nodes)):
                    raise ValueError(f"edge {source}->{target} names no node")
                inputs[int(target)].append(int(source))
            external: list[list[str]] = [[] for _ in nodes]
            for parent, target in data.get("ext", []):
                if not 0 <= int(target) < len(nodes):
                    raise ValueError(f"input {parent} of node {target}: no such node")
                external[int(target)].append(str(parent))
            exits = tuple(int(i) for i in data.get("exits", []))
        except (KeyError, TypeError, IndexError) as exc:
            raise ValueError(f"not a workflow spec: {exc!r}") from None
        return cls(
            nodes,
            tuple(tuple(i) for i in inputs),
            tuple(tuple(e) for e in external),
            exits,
        )

    def dependents(self) -> list[list[int]]:
        """Per node, the indices of the nodes that wait for it."""
        found: list[list[int]] = [[] for _ in self.nodes]
        for target, sources in enumerate(self.inputs):
            for source in sources:
                found[source].append(target)
        return found


def layers(spec: Spec) -> list[int]:
    """Each node's layer: 0 for a source, else 1 + the largest layer of its inputs.

    A node on a cycle (a corrupt spec: a created workflow has none) gets the layer after
    the largest one found, so every node is shown.
    """
    count = len(spec.nodes)
    pending = [len(set(sources)) for sources in spec.inputs]
    dependents = spec.dependents()
    layer = [0] * count
    ready = deque(i for i in range(count) if pending[i] == 0)
    placed = 0
    while ready:
        node = ready.popleft()
        placed += 1
        for target in dict.fromkeys(dependents[node]):
            layer[target] = max(layer[target], layer[node] + 1)
            pending[target] -= 1
            if pending[target] == 0:
                ready.append(target)
    if placed < count:
        last = max(layer, default=0) + 1
        for i in range(count):
            if pending[i] > 0:
                layer[i] = last
    return layer


@dataclass
class Window:
    """The layers one page shows: node indices per layer, in declared order."""

    #: ``(layer number, node indices)`` for each layer shown.
    layers: list[tuple[int, list[int]]] = field(default_factory=list)
    #: The first layer of the next page (``None``: this page shows the last one).
    next_layer: int | None = None
    #: The first layer of the previous page (``None``: this page starts at layer 0).
    previous_layer: int | None = None
    #: Nodes of the last layer shown that the page leaves out (a layer above the limit).
    cut: int = 0
    #: Layers in all.
    total_layers: int = 0

    @property
    def indices(self) -> list[int]:
        """Every node index shown, layer by layer."""
        return [i for _layer, nodes in self.layers for i in nodes]


def window(layer_of: list[int], start: int, limit: int = MAX_NODES) -> Window:
    """The whole layers from ``start`` holding at most ``limit`` nodes in all (always at
    least one layer: its first ``limit`` nodes when it has more)."""
    by_layer: dict[int, list[int]] = {}
    for i, n in enumerate(layer_of):
        by_layer.setdefault(n, []).append(i)
    total = max(by_layer, default=-1) + 1
    start = min(max(0, start), max(0, total - 1))
    shown = Window(total_layers=total)
    count = 0
    layer = start
    while layer < total:
        nodes = by_layer.get(layer, [])
        if shown.layers and count + len(nodes) > limit:
            break
        if len(nodes) > limit:
            shown.cut = len(nodes) - limit
            nodes = nodes[:limit]
        shown.layers.append((layer, nodes))
        count += len(nodes)
        layer += 1
    shown.next_layer = layer if layer < total else None
    if start > 0:
        back, count = start, 0
        while back > 0 and count + len(by_layer.get(back - 1, [])) <= limit:
            back -= 1
            count += len(by_layer.get(back, []))
        shown.previous_layer = back if back < start else start - 1
    return shown


@dataclass(frozen=True)
class MapPoint:
    """A node's dot on the map of links."""

    index: int
    x: int
    y: int


def map_points(shown: Window) -> dict[int, MapPoint]:
    """The dot of each node shown: one column per layer, one row per node of it."""
    points = {}
    for column, (_layer, nodes) in enumerate(shown.layers):
        for row, index in enumerate(nodes):
            points[index] = MapPoint(
                index, RADIUS * 2 + column * LAYER_GAP, RADIUS * 2 + row * ROW_GAP
            )
    return points


def map_size(points: dict[int, MapPoint]) -> tuple[int, int]:
    """The map's width and height for ``points``."""
    width = max((p.x for p in points.values()), default=0) + RADIUS * 2
    height = max((p.y for p in points.values()), default=0) + RADIUS * 2
    return width, height
