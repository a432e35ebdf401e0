"""What a job that waited receives (django_rqueue.inputs): each input's value and the value
prepended to its arguments. Pure: nothing here touches Redis."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest
from cryptography.fernet import Fernet
from pytest_django.fixtures import Settings

from django_rqueue.dependencies import GATE_OPEN, Arrival, DependencyFailed, decode
from django_rqueue.encryption import seal
from django_rqueue.inputs import Inputs, input_value, inputs_of, prepend
from django_rqueue.serialization import dumps

ERROR = json.dumps({"type": "ValueError", "message": "bad input", "traceback": "T", "worker": "w"})

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
        ({"dn": "x"}, "field 'dn' is not a whole number"),
        ({"dn": "-1"}, "field 'dn' is not a whole number"),
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


# ------------------------------------------------------------------ a record's inputs --


def test_a_record_without_an_input_count_has_no_inputs():
    assert Inputs.of({"s": "queued", "n": "app.jobs.f"}) is None


def test_a_waiting_record_says_what_arrived_and_what_is_missing():
    fields = {
        "s": "waiting",
        "dn": "3",
        "dw": "2",
        "df": "1",
        "di": "q:a q:b q:c",
        "dp": "r",
        "dr": "[[1,2],3]",
        "i:0": "g0:",
        "i:2": f"f4:5:app.b{ERROR}",
        "i:3": "r7",
    }
    inputs = Inputs.of(fields)
    assert inputs is not None
    assert (inputs.count, inputs.missing, inputs.failed, inputs.cancelled) == (3, 2, 1, 0)
    assert inputs.ids == ("q:a", "q:b", "q:c") and inputs.id_of(2) == "q:b"
    assert inputs.on_failure == "run" and inputs.pass_shape == "[[1,2],3]"
    assert sorted(inputs.arrivals) == [0, 2, 3]
    assert inputs.arrivals[0] == GATE_OPEN and not inputs.arrivals[3].arrived
    with pytest.raises(ValueError, match="input 1 has not arrived"):
        inputs.values()
    # Once every input arrived (as bytes, as Redis returns them), the values in order.
    fields |= {"i:1": "s2:10", "i:3": "s9:30", "dw": "0"}
    done = Inputs.of({k: v.encode() for k, v in fields.items()})
    assert done is not None and done.missing == 0
    failed = DependencyFailed("q:b", "app.b", "failed", "ValueError", "bad input")
    assert done.values() == [10, failed, 30]
    assert prepend(done.pass_shape or "", done.values()) == [[10, failed], 30]


def test_defaults_cancel_on_failure_and_pass_nothing():
    inputs = Inputs.of({"dn": "1", "dw": "1"})
    assert inputs is not None
    assert (inputs.on_failure, inputs.pass_shape, inputs.ids) == ("cancel", None, ())
    assert inputs.id_of(1) == ""


def test_a_huge_corrupt_count_reads_only_the_fields_present():
    inputs = Inputs.of({"dn": str(10**15), "i:1": "s1:1"})
    assert inputs is not None and list(inputs.arrivals) == [1]


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"dn": "1", "dw": "many"}, "field 'dw' is not a whole number"),
        ({"dn": "1", "df": "-2"}, "field 'df' is not a whole number"),
        ({"dn": "1", "i:1": "x"}, "not an arrival value"),
    ],
)
def test_a_record_whose_inputs_are_corrupt_is_refused(fields: dict[str, str], error: str):
    with pytest.raises(ValueError, match=error):
        Inputs.of(fields)
