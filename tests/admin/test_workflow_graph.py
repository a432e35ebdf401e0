"""The layout of a workflow's admin page (pure): the spec read back, layers by longest path,
the layers a page shows within its node limit, and the map's points."""

from __future__ import annotations

import json

import pytest

from django_rqueue.admin import workflow_graph as graph


def spec(
    count: int, edges: list[tuple[int, int]], ext: list[tuple[str, int]] | None = None
) -> graph.Spec:
    raw = {
        "nodes": [[f"default:n{i}", f"job{i}"] for i in range(count)],
        "edges": [list(e) for e in edges],
        "ext": [list(e) for e in ext or []],
        "exits": [count - 1],
    }
    return graph.Spec.parse(json.dumps(raw))


def test_a_layer_is_the_longest_path_from_a_source():
    # 0 -> 1 -> 3, 0 -> 3, 2 -> 3: node 3 comes after 1, not beside it.
    shape = spec(4, [(0, 1), (1, 3), (0, 3), (2, 3)], [("low:outside", 2)])
    assert graph.layers(shape) == [0, 1, 0, 2]
    assert shape.inputs == ((), (0,), (), (1, 0, 2))
    assert shape.external == ((), (), ("low:outside",), ())
    assert shape.dependents() == [[1, 3], [3], [3], []]


def test_a_cycle_in_a_corrupt_spec_still_places_every_node():
    assert graph.layers(spec(3, [(0, 1), (1, 2), (2, 1)])) == [0, 2, 2]


@pytest.mark.parametrize(
    "raw",
    ['{"nodes": [["a", "x"]], "edges": [[0, 5]]}', '{"edges": []}', '{"nodes": 3}', "[1]"],
)
def test_a_spec_of_the_wrong_shape_is_a_value_error(raw: str):
    with pytest.raises(ValueError):
        graph.Spec.parse(raw)


def test_a_page_shows_whole_layers_up_to_the_limit_and_links_the_others():
    layer_of = [0, 0, 0, 1, 1, 2, 3, 3, 3]

    first = graph.window(layer_of, 0, limit=5)
    second = graph.window(layer_of, first.next_layer or 0, limit=5)
    last = graph.window(layer_of, 3, limit=5)

    assert first.layers == [(0, [0, 1, 2]), (1, [3, 4])]
    assert (first.next_layer, first.previous_layer, first.total_layers) == (2, None, 4)
    assert second.layers == [(2, [5]), (3, [6, 7, 8])] and second.next_layer is None
    assert second.previous_layer == 0  # layers 0 and 1 fit on the page before it
    # Back from layer 3: layers 2 and 1 fit in 5 nodes, layer 0 would not.
    assert last.previous_layer == 1 and last.indices == [6, 7, 8]


def test_a_layer_above_the_limit_is_cut_and_says_how_many_it_left_out():
    shown = graph.window([0] * 7 + [1], 0, limit=5)
    assert shown.layers == [(0, [0, 1, 2, 3, 4])] and shown.cut == 2
    assert shown.next_layer == 1


def test_the_map_has_a_column_per_layer_and_a_row_per_node():
    shown = graph.window([0, 0, 1], 0)
    points = graph.map_points(shown)
    assert [(p.x, p.y) for p in points.values()] == [(12, 12), (12, 30), (72, 12)]
    assert graph.map_size(points) == (84, 42)
