"""The wire format of dependencies (django_rqueue.dependencies): edge entries, arrival values,
what a dependent receives. Pure: nothing here touches Redis."""

from __future__ import annotations

import datetime
import json
import pickle
from typing import Any, cast

import pytest
from cryptography.fernet import Fernet
from pytest_django.fixtures import Settings

from django_rqueue.dependencies import (
    GATE_OPEN,
    Arrival,
    ArrivalKind,
    DependencyFailed,
    Dependents,
    Edge,
    decode,
    input_value,
    inputs_of,
    prepend,
)
from django_rqueue.encryption import seal
from django_rqueue.exceptions import RqueueError
from django_rqueue.serialization import dumps

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


# ------------------------------------------------------------------ what a dependent gets --

WHEN = datetime.datetime(2026, 11, 28, 10, 30, tzinfo=datetime.UTC)


@pytest.mark.parametrize(
    ("arrival", "value"),
    [
        (Arrival("s", 1, '{"a":[1,2]}'), {"a": [1, 2]}),
        (Arrival("s", 1, dumps(WHEN)), WHEN),  # tagged types decode as a result does
        (Arrival("s", 1, ""), None),  # a count-only edge
        (Arrival("s", 1, "null"), None),
        (
            Arrival("f", 3, ERROR, name="app.x"),
            DependencyFailed("q:in", "app.x", "failed", "ValueError", "bad input"),
        ),
        (Arrival("f", 3, "", name="app.x"), DependencyFailed("q:in", "app.x", "failed")),
        (
            Arrival("c", 3, name="app.x", reason=""),
            DependencyFailed("q:in", "app.x", "cancelled"),
        ),
        (
            Arrival("c", 3, name="app.x", reason="expired"),
            DependencyFailed("q:in", "app.x", "expired", "", "expired"),
        ),
        (
            Arrival("c", 3, name="app.x", reason="dependency_timeout"),
            DependencyFailed("q:in", "app.x", "cancelled", "", "dependency_timeout"),
        ),
    ],
)
def test_a_dependent_gets_the_result_or_a_dependency_failed(arrival: Arrival, value: Any):
    got = input_value(arrival, "q:in")
    assert got == value
    assert type(got) is type(value)


@pytest.mark.parametrize(
    ("body", "error_type", "message"),
    [
        ("{", "", "(unreadable error record: "),
        ("[1]", "", "(unreadable error record: not an object)"),
        ("[" * 200 + "]" * 200, "", "(unreadable error record: JSON nested deeper"),
        ('{"type": 1, "message": null}', "1", ""),
        ("{}", "", ""),
    ],
)
def test_an_unreadable_error_record_still_gives_a_dependency_failed(
    body: str, error_type: str, message: str
):
    got = input_value(Arrival("f", 1, body, name="n"), "q:in")
    assert isinstance(got, DependencyFailed) and got.status == "failed"
    assert got.error_type == error_type
    assert got.message.startswith(message) if message else got.message == ""


@pytest.mark.parametrize("arrival", [GATE_OPEN, Arrival("r", 4), Arrival("s", 1, "{")])
def test_what_is_not_an_outcome_or_does_not_decode_is_refused(arrival: Arrival):
    with pytest.raises(ValueError):
        input_value(arrival, "q:in")


def use_keys(settings: Settings, *keys: str) -> None:
    rqueue = {k: v for k, v in settings.RQUEUE.items() if k != "ENCRYPTION_KEYS"}
    settings.RQUEUE = {**rqueue, "ENCRYPTION_KEYS": list(keys)} if keys else rqueue


def test_encrypted_results_and_errors_are_opened(settings: Settings):
    key = Fernet.generate_key().decode()
    use_keys(settings, key)
    result, error = seal('{"secret":1}'), seal(ERROR)
    assert result.startswith("fernet:") and "secret" not in result
    assert input_value(decode(f"s1:{result}"), "q:a") == {"secret": 1}
    failed = input_value(decode(f"f1:1:n{error}"), "q:a")
    assert failed == DependencyFailed("q:a", "n", "failed", "ValueError", "bad input")
    # Without the key: the result cannot be passed, the failure still is, saying why.
    use_keys(settings, Fernet.generate_key().decode())
    with pytest.raises(ValueError, match="inputs are encrypted with a key"):
        input_value(decode(f"s1:{result}"), "q:a")
    failed = input_value(decode(f"f1:1:n{error}"), "q:a")
    assert isinstance(failed, DependencyFailed) and failed.error_type == ""
    assert "errors are encrypted with a key" in failed.message


@pytest.mark.parametrize(
    ("fields", "values"),
    [
        ({}, []),
        ({"dn": "0"}, []),
        ({"dn": "1", "di": "q:a", "i:1": "s4:7"}, [7]),
        (
            {"dn": "2", "di": "q:a r:b", "i:0": "g0:", "i:1": "s4:[1]", "i:2": "c9::1:n"},
            [[1], DependencyFailed("r:b", "n", "cancelled")],
        ),
        # A finisher lists no ids: its DependencyFailed have none.
        ({"dn": "1", "i:1": "f2:1:n"}, [DependencyFailed("", "n", "failed")]),
    ],
)
def test_the_inputs_of_a_record_in_index_order(fields: dict[str, str], values: list[Any]):
    assert inputs_of(fields) == values
    assert inputs_of({k: v.encode() for k, v in fields.items()}) == values


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"dn": "2", "i:1": "s1:1"}, "input 2 has not arrived"),
        ({"dn": "1", "i:1": "r5"}, "input 1 has not arrived"),
        ({"dn": "x"}, "input count is not a whole number"),
        ({"dn": "-1"}, "input count is not a whole number"),
        ({"dn": "1", "i:1": "zz"}, "not an arrival value"),
    ],
)
def test_inputs_that_cannot_be_read_are_refused(fields: dict[str, str], error: str):
    with pytest.raises(ValueError, match=error):
        inputs_of(fields)


FAILED = DependencyFailed("q:c", "app.c", "failed", "KeyError", "k")
INPUTS = ["a", {"b": 2}, FAILED]


@pytest.mark.parametrize(
    ("shape", "value"),
    [
        ("1", "a"),
        ("3", FAILED),
        ("L", INPUTS),
        (b"L", INPUTS),
        ("[]", []),
        ("[2]", [{"b": 2}]),  # a group of one is still a list
        ("[[1,2],3]", [["a", {"b": 2}], FAILED]),
        ("[1,1]", ["a", "a"]),
        (" [ [ 3 ] ] ", [[FAILED]]),
    ],
)
def test_the_pass_shape_arranges_the_inputs(shape: str | bytes, value: Any):
    assert prepend(shape, INPUTS) == value


def test_every_input_of_no_inputs_is_an_empty_list():
    assert prepend("L", []) == [] and prepend("[]", []) == []


@pytest.mark.parametrize(
    "shape",
    ["0", "4", "-1", "true", "1.0", '"1"', "[1,[0]]", "[null]", "{}", "{", "", "l", "[4]"]
    + ["[" * 200 + "1" + "]" * 200],  # nested too deep: a ValueError, never RecursionError
)
def test_a_shape_that_is_not_one_is_refused(shape: str):
    with pytest.raises(ValueError, match="shape"):
        prepend(shape, INPUTS)


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
