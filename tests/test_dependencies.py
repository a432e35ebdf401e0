"""The wire format of dependencies (django_rqueue.dependencies): edge entries, arrival values,
DependencyFailed. Pure: nothing here touches Redis."""

from __future__ import annotations

import json
import pickle
from typing import Any, cast

import pytest

from django_rqueue.dependencies import (
    GATE_OPEN,
    Arrival,
    ArrivalKind,
    DependencyFailed,
    Dependents,
    Edge,
    decode,
)
from django_rqueue.exceptions import RqueueError

ERROR = json.dumps({"type": "ValueError", "message": "bad input", "traceback": "T", "worker": "w"})

# --------------------------------------------------------------------------- arrivals --

ARRIVALS: list[tuple[Arrival, str]] = [
    (Arrival("s", 3, '{"a":1}'), 's3:{"a":1}'),
    (Arrival("s", 0, ""), "s0:"),  # a count-only edge: no body
    (Arrival("s", 1, '"a:b:c"'), 's1:"a:b:c"'),  # a result holding the separator
    (Arrival("s", 12, "fernet:gAAAAA=="), "s12:fernet:gAAAAA=="),  # kept sealed
    (Arrival("s", 2**53, "null"), f"s{2**53}:null"),
    (Arrival("f", 2, ERROR, name="app.jobs.x"), f"f2:10:app.jobs.x{ERROR}"),
    (Arrival("f", 2, ERROR, name="task:a.b"), f"f2:8:task:a.b{ERROR}"),  # ':' in the name
    (Arrival("f", 9, "", name="é.x"), "f9:4:é.x"),  # the length counts UTF-8 bytes
    (Arrival("f", 5, "", name=""), "f5:0:"),
    (Arrival("c", 4, name="app.x", reason=""), "c4::5:app.x"),  # Job.cancel()
    (Arrival("c", 4, name="app.x", reason="dependency_failed"), "c4:dependency_failed:5:app.x"),
    (Arrival("c", 0, name="q:job", reason="deleted"), "c0:deleted:5:q:job"),
    (GATE_OPEN, "g0:"),
    (Arrival("r", 7), "r7"),
    (Arrival("r", 0), "r0"),
]


@pytest.mark.parametrize(("arrival", "stored"), ARRIVALS)
def test_an_arrival_is_stored_as_the_lua_scripts_write_it(arrival: Arrival, stored: str):
    assert arrival.encode() == stored
    assert decode(stored) == arrival
    assert decode(stored.encode()) == arrival  # as Redis returns it


@pytest.mark.parametrize(
    "value",
    [
        *("", "x1:", "s", "s:", "s-1:", "s+1:", "s01:x", "sa:", "s1", "S1:x"),
        *("f1:5:abc", "f1:x:abc", "f1:-1:", "f1:01:a", "f1"),  # name length wrong or missing
        *("c1:reason", "c1::3:abcd", "c1::3:ab", "c1::", "cx::1:a"),
        *("g1:", "g0:x", "g0", "g:"),
        *("r", "r1:", "r01", "r-1", "rx"),
        "s" + "9" * 21 + ":",  # a token no Redis counter reaches
    ],
)
def test_a_value_that_is_not_an_arrival_is_refused(value: str):
    with pytest.raises(ValueError, match="not an arrival value"):
        decode(value)


@pytest.mark.parametrize("value", [b"f1:1:\xff", b"s1:\xff\xfe", b"c1::1:\xff"])
def test_an_arrival_that_is_not_utf8_is_refused(value: bytes):
    with pytest.raises(ValueError, match="not an arrival value"):
        decode(value)


@pytest.mark.parametrize(
    "arrival",
    [
        Arrival("c", 1, name="x", reason="a:b"),  # would end the reason early
        Arrival("s", -1, "1"),
        Arrival(cast(ArrivalKind, "x"), 1),
    ],
)
def test_an_arrival_that_cannot_be_stored_is_refused(arrival: Arrival):
    with pytest.raises(ValueError):
        arrival.encode()


def test_only_a_tombstone_has_not_arrived():
    assert [a.arrived for a, _ in ARRIVALS].count(False) == 2
    assert not Arrival("r", 3).arrived and GATE_OPEN.arrived
    assert Arrival("s", 1).succeeded and not Arrival("f", 1, name="x").succeeded


# ------------------------------------------------------------------------------ edges --

EDGES: list[tuple[Edge, str]] = [
    (Edge("p", "i", 3, "io:AbCdEfGhIjKlMnOpQrStUv"), "pi3:io:AbCdEfGhIjKlMnOpQrStUv"),
    (Edge("c", "o", 1, "default:W.f"), "co1:default:W.f"),  # a finisher's id
    (Edge("p", "o", 10_000, "bulk.low:x:y"), "po10000:bulk.low:x:y"),
    (Edge("c", "i", 1, "q:a"), "ci1:q:a"),
]


@pytest.mark.parametrize(("edge", "stored"), EDGES)
def test_an_edge_entry_is_copy_path_index_and_dependent(edge: Edge, stored: str):
    assert edge.encode() == stored
    assert Edge.decode(stored) == edge


@pytest.mark.parametrize(
    "entry",
    ["", "+", "w", "xi1:q:a", "pz1:q:a", "pi0:q:a", "pi01:q:a", "pi:q:a", "pi1", "pi-1:q:a"]
    + ["pi1:noqueue", "pi1:q:", "pi1:q:a b", "Pi1:q:a", "pi1 :q:a"],
)
def test_an_entry_that_is_not_an_edge_is_refused(entry: str):
    with pytest.raises(ValueError, match="not an edge entry"):
        Edge.decode(entry)


@pytest.mark.parametrize(
    "edge",
    [
        Edge("p", "i", 0, "q:a"),  # the gate is no edge
        Edge("p", "i", 1, "not-an-id"),
        Edge("p", "i", 1, "q:a b"),  # would split the field
        Edge(cast(Any, "x"), "i", 1, "q:a"),
        Edge("p", cast(Any, "x"), 1, "q:a"),
    ],
)
def test_an_edge_that_cannot_be_stored_is_refused(edge: Edge):
    with pytest.raises(ValueError):
        edge.encode()


@pytest.mark.parametrize(
    ("stored", "dependents"),
    [
        ("", Dependents()),
        ("pi1:q:a", Dependents((Edge("p", "i", 1, "q:a"),))),
        ("pi1:q:a co2:r:b", Dependents((Edge("p", "i", 1, "q:a"), Edge("c", "o", 2, "r:b")))),
        ("pi1:q:a +", Dependents((Edge("p", "i", 1, "q:a"),), linked=True)),
        ("+", Dependents(linked=True)),
        ("w", Dependents(finisher=True)),
    ],
)
def test_the_dependents_field_holds_edges_and_the_two_markers(stored: str, dependents: Dependents):
    assert Dependents.decode(stored) == dependents
    assert Dependents.decode(stored.encode()) == dependents
    assert dependents.encode() == stored


def test_the_dependents_field_refuses_an_entry_that_is_not_one():
    with pytest.raises(ValueError, match="not an edge entry"):
        Dependents.decode("pi1:q:a pi0:q:b")


# ------------------------------------------------------------------- DependencyFailed --


def test_a_dependency_failed_is_a_value_with_five_fields():
    failed = DependencyFailed("q:a", "app.a", "failed", "ValueError", "bad")
    assert isinstance(failed, Exception) and isinstance(failed, RqueueError)
    fields = (failed.job_id, failed.name, failed.status, failed.error_type, failed.message)
    assert fields == ("q:a", "app.a", "failed", "ValueError", "bad")
    assert failed == DependencyFailed("q:a", "app.a", "failed", "ValueError", "bad")
    assert failed != DependencyFailed("q:a", "app.a", "failed", "ValueError", "other")
    assert failed != "q:a"
    assert len({failed, DependencyFailed("q:a", "app.a", "failed", "ValueError", "bad")}) == 1
    assert pickle.loads(pickle.dumps(failed)) == failed  # noqa: S301 - our own bytes
    assert str(failed) == "dependency app.a (q:a) failed: ValueError: bad"
    assert repr(failed) == "DependencyFailed('q:a', 'app.a', 'failed', 'ValueError', 'bad')"
    cancelled = DependencyFailed("", "app.b", "cancelled", "", "dependency_failed")
    assert str(cancelled) == "dependency app.b (?) cancelled: dependency_failed"
    assert str(DependencyFailed("q:c", "app.c", "cancelled")) == "dependency app.c (q:c) cancelled"
