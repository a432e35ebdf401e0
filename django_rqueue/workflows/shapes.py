"""Shapes of a workflow as text: what a node gets prepended (``dr``), and the record's ``spec``.

A *tree* is a node index, or a list of trees: the output of a workflow element (one
node's result, or a group's list in member order, nested for groups inside groups).
:func:`encode_shape` writes a tree of input indices as
:attr:`~django_rqueue.engine.fields.JobFields.PASS_SHAPE` (read back by
:func:`django_rqueue.inputs.prepend`); :func:`spec_json` writes the record's
:attr:`~django_rqueue.engine.fields.WorkflowFields.SPEC`. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

from ..dependencies import EVERY_INPUT

#: A node (or input) index, or a list of trees.
type Tree = int | list[Tree]


def flatten(tree: Tree) -> Iterator[int]:
    """The indices of ``tree``, left to right."""
    if isinstance(tree, int):
        yield tree
        return
    for branch in tree:
        yield from flatten(branch)


def encode_shape(tree: Tree, inputs: int) -> str:
    """``tree`` (of input indices, 1-based) as the field ``dr``: ``"L"`` for the list of
    every input ``1`` .. ``inputs`` in order, else compact JSON (``"1"``, ``"[[1,2],3]"``,
    ``"[]"``)."""
    if isinstance(tree, list) and tree == list(range(1, inputs + 1)) and tree:
        return EVERY_INPUT
    return json.dumps(tree, separators=(",", ":"))


def spec_json(
    nodes: Sequence[tuple[str, str]],
    edges: Sequence[tuple[int, int]],
    external: Sequence[tuple[str, int]],
    shape: Tree,
    places: Sequence[Sequence[str]],
) -> str:
    """The record's ``spec``, compact JSON of an object:

    - ``nodes``: ``[[id, job name], ...]`` in declared order;
    - ``edges``: ``[[from, to], ...]`` by node index (``to`` waits for ``from``);
    - ``ext``: ``[[job id, to], ...]``, the inputs from outside (``depends_on``);
    - ``exits``: the node indices whose results make the workflow's result;
    - ``shape``: that result as a tree of node indices;
    - ``locs``: the queues of each location written (one Redis server, or one Cluster slot).
    """
    return json.dumps(
        {
            # json writes tuples as arrays: no copies of the 10 000-item lists
            "nodes": nodes,
            "edges": edges,
            "ext": external,
            "exits": list(flatten(shape)),
            "shape": shape,
            "locs": places,
        },
        separators=(",", ":"),
    )
