"""JSON payloads (django_rqueue.serialization): what round-trips, and what is refused."""

from __future__ import annotations

import datetime
import decimal
import json
import uuid
import zoneinfo
from typing import Any

import pytest
import redis
from django.utils.translation import gettext_lazy

from django_rqueue import get_job, job
from django_rqueue.execution import run_attempt
from django_rqueue.job import Job, JobStatus
from django_rqueue.serialization import (
    MAX_JSON_BYTES,
    MAX_JSON_DEPTH,
    decode_arguments,
    dumps,
    encode_arguments,
    encode_result,
    loads,
    too_deep,
)
from django_rqueue.tasks_api import normalize_json

TEHRAN = zoneinfo.ZoneInfo("Asia/Tehran")  # +03:30: a non-whole-hour offset

ROUND_TRIPS = [
    datetime.datetime(2026, 3, 1, 12, 30, 45, 123456, tzinfo=datetime.UTC),
    datetime.datetime(
        2026, 3, 1, 12, 30, 45, 1, tzinfo=datetime.timezone(datetime.timedelta(hours=-5))
    ),
    datetime.datetime(2026, 3, 1, 12, 30, 45, 999999),  # naive stays naive
    datetime.datetime(2026, 7, 1, 9, 0, tzinfo=TEHRAN).astimezone(TEHRAN),
    datetime.date(1999, 12, 31),
    datetime.time(23, 59, 59, 999999),
    datetime.time(7, 5, tzinfo=datetime.UTC),
    decimal.Decimal("0.1"),
    decimal.Decimal("-12345678901234567890.000000000000000001"),
    decimal.Decimal("1E+3"),
    uuid.UUID("12345678-1234-5678-1234-567812345678"),
]


@job
def echo(*args: object, **kwargs: object) -> None:
    return None


@job
def typed(user_id: int, when: object, *, note: str = "") -> None:
    return None


@job
def returns_a_set() -> set[int]:
    return {1, 2}


@job
def returns_a_decimal() -> decimal.Decimal:
    return decimal.Decimal("2.50")


@pytest.mark.parametrize("value", ROUND_TRIPS, ids=repr)
def test_rich_values_round_trip_exactly(value: object):
    back = loads(dumps(value))
    assert back == value
    assert type(back) is type(value)
    if isinstance(value, datetime.datetime | datetime.time):
        assert isinstance(back, datetime.datetime | datetime.time)
        assert back.utcoffset() == value.utcoffset()
        assert (back.tzinfo is None) == (value.tzinfo is None)


def test_a_decimal_keeps_its_exponent():
    assert str(loads(dumps(decimal.Decimal("2.50")))) == "2.50"


def test_nested_values_round_trip():
    value = {"when": [datetime.date(2026, 1, 2), {"id": uuid.UUID(int=5)}], "n": None}
    assert loads(dumps(value)) == value


def test_tuples_read_back_as_lists():
    assert loads(dumps((1, (2, 3)))) == [1, [2, 3]]


def test_tuples_and_non_str_keys_arrive_as_django_tasks_stores_them():
    """The rule in serialization's docstring: what ``django.tasks`` makes of a value
    (``normalize_json``) and a backend stores as JSON, a job receives."""
    value = ((1, (2, 3)), {3: "int", 2.5: "float", True: "bool", None: "none", "s": (4,)})
    expected = [[1, [2, 3]], {"3": "int", "2.5": "float", "true": "bool", "null": "none", "s": [4]}]
    assert loads(dumps(value)) == expected
    assert json.loads(json.dumps(normalize_json(value))) == expected
    queued = echo.delay(*value, key={7: (8,)})
    back = get_job(queued.id)
    assert back is not None
    assert back.args == expected and back.kwargs == {"key": {"7": [8]}}


@pytest.mark.parametrize("value", [{(1, 2): "tuple key"}, b"bytes", {1, 2}, float("nan")], ids=repr)
def test_other_types_raise_naming_the_argument(value: object):
    with pytest.raises(TypeError, match=r"job argument 'when' cannot be sent as JSON"):
        typed.delay(1, when=value)


def test_lazy_translations_are_sent_as_text():
    assert loads(dumps(gettext_lazy("Hello"))) == "Hello"


@pytest.mark.parametrize(
    "value", [object(), {1, 2}, b"bytes", float("nan"), float("inf"), {(1, 2): "tuple key"}]
)
def test_values_json_cannot_carry_are_refused(value: object):
    with pytest.raises((TypeError, ValueError)):
        dumps(value)


@pytest.mark.parametrize(
    "value",
    [
        [1795550807.0080292, 0.0, -1e300, 5e-324, 2**70, True, None, "/tmp/a b\\c\n"],
        {"ü": "日本", "k": {"nested": [1, [2, {"x": "\u2028"}]]}},
        "a bare string",
        (),
        {},
    ],
    ids=repr,
)
def test_dumps_writes_what_the_json_modules_encoder_writes(value: object):
    """``dumps`` makes its C encoder once (a saving on every ``.delay()``): the text must
    stay the one ``json.dumps`` with the same settings makes."""
    assert dumps(value) == json.dumps(value, allow_nan=False, separators=(",", ":"))


def test_a_value_that_contains_itself_is_a_value_error():
    looped: list[object] = [1]
    looped.append(looped)
    with pytest.raises(ValueError, match="contains itself"):
        dumps(looped)
    with pytest.raises(TypeError, match="'user_id' \\(position 0\\)"):
        encode_arguments((looped, 1), {}, typed.func)


def _nested(depth: int) -> Any:  # a list ``depth`` levels deep, [] innermost
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000 + "]" * 100_000,  # CPython's C decoder: RecursionError
        "[" * 100_000,  # unterminated: the decoder recurses before it finds the error
        '{"a":' * 20_000 + "1" + "}" * 20_000,
        "[" * 129 + "]" * 129,
    ],
    ids=["lists", "unterminated", "objects", "limit+1"],
)
def test_json_nested_deeper_than_the_limit_is_a_value_error_not_a_recursion_error(text: str):
    with pytest.raises(ValueError, match=f"nested deeper than {MAX_JSON_DEPTH} levels"):
        loads(text)
    with pytest.raises(ValueError, match="nested deeper"):
        decode_arguments(text.encode())


def test_json_at_the_depth_limit_reads_back():
    assert loads("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH) == _nested(MAX_JSON_DEPTH)
    wide = [[{"k": [i]}] for i in range(500)]  # 1 000 brackets, 4 levels: the slow path
    assert loads(dumps(wide)) == wide


def test_brackets_inside_strings_do_not_count_as_depth():
    tricky = ["]" * 300, '\\"]]]', "[" * 300, '"[[{', {"k[": ["\\"]}]
    text = dumps([tricky] * 50)
    assert not too_deep(text)
    assert loads(text) == [tricky] * 50
    # ... nor can closing brackets in a string hide real depth.
    hidden = '["' + "]" * 200 + '",' + "[" * 200 + "]" * 200 + "]"
    assert too_deep(hidden)


def test_a_value_nested_deeper_than_the_limit_is_refused_at_delay(redis_client: redis.Redis):
    with pytest.raises(ValueError, match=f"nested deeper than {MAX_JSON_DEPTH} levels"):
        dumps(_nested(MAX_JSON_DEPTH + 1))
    before = redis_client.dbsize()
    with pytest.raises(TypeError, match="job argument at position 0 cannot be sent as JSON"):
        echo.delay(_nested(MAX_JSON_DEPTH + 1))
    with pytest.raises(TypeError, match="job arguments cannot be sent as JSON: .* nested deeper"):
        echo.delay(_nested(MAX_JSON_DEPTH))  # one more level: the list of arguments
    assert redis_client.dbsize() == before
    with pytest.raises(TypeError, match="job return value cannot be stored as JSON"):
        encode_result(_nested(MAX_JSON_DEPTH + 1))


def test_json_longer_than_the_limit_is_a_value_error_before_decoding():
    text = '"' + "x" * MAX_JSON_BYTES + '"'
    with pytest.raises(ValueError, match=f"longer than the {MAX_JSON_BYTES} bytes"):
        loads(text)
    # What no reader would decode is not stored either.
    with pytest.raises(TypeError, match=f"more than the {MAX_JSON_BYTES} bytes"):
        encode_result("x" * MAX_JSON_BYTES)


def test_a_tagged_value_that_does_not_parse_is_a_value_error():
    for tag in ("decimal", "uuid", "datetime"):
        with pytest.raises(ValueError, match=f"undecodable {tag} 'abc'"):
            loads(f'{{"__rqueue__":"{tag}","v":"abc"}}')


def test_never_pickle():
    # A payload is plain JSON text: nothing in it can name code to run.
    text = dumps({"a": [datetime.date(2026, 1, 1)], "k": {}})
    assert text == '{"a":[{"__rqueue__":"date","v":"2026-01-01"}],"k":{}}'
    assert loads('{"__rqueue__":"os.system","v":"echo hi"}') == {
        "__rqueue__": "os.system",
        "v": "echo hi",
    }


def test_a_non_json_positional_argument_is_named_by_its_parameter():
    with pytest.raises(TypeError, match=r"job argument 'when' \(position 1\).*set"):
        encode_arguments((1, {2}), {}, typed.func)


def test_a_non_json_keyword_argument_is_named():
    with pytest.raises(TypeError, match=r"job argument 'note' cannot be sent as JSON"):
        encode_arguments((1, 2), {"note": object()}, typed.func)


def test_a_non_json_argument_beyond_the_signature_is_named_by_position():
    with pytest.raises(TypeError, match=r"job argument at position 2 cannot be sent as JSON"):
        encode_arguments((1, 2, b"x"), {}, echo.func)


def test_arguments_round_trip_through_encode_and_decode():
    args, kwargs = (1, datetime.date(2026, 5, 4)), {"note": decimal.Decimal("1.10")}
    assert decode_arguments(encode_arguments(args, kwargs)) == (list(args), kwargs)


def test_positional_arguments_alone_are_sent_as_a_bare_array():
    payload = encode_arguments((1, "x", None), {})
    assert payload == '[1,"x",null]'
    assert decode_arguments(payload) == ([1, "x", None], {})
    assert decode_arguments(b'{"a":[1],"k":{}}') == ([1], {})  # the longer form still reads


@pytest.mark.parametrize(
    "payload", [b"", b"not json", b"{}", b"3", b'{"a":{},"k":{}}', b'{"a":[]}']
)
def test_a_payload_of_the_wrong_shape_is_a_value_error(payload: bytes):
    with pytest.raises(ValueError):
        decode_arguments(payload)


def test_a_non_json_return_value_is_a_type_error_naming_its_type():
    with pytest.raises(TypeError, match="job return value cannot be stored as JSON.*set"):
        encode_result({1})


def test_a_non_json_return_value_fails_the_attempt_with_a_clear_error():
    attempt: Job[Any] = Job(
        id="default:" + "0" * 32, name=returns_a_set.name, queue="default", status=JobStatus.RUNNING
    )
    outcome = run_attempt(returns_a_set, attempt)
    assert not outcome.ok
    assert isinstance(outcome.exception, TypeError)
    assert "job return value cannot be stored as JSON" in str(outcome.exception)
    assert "set" in str(outcome.exception)
    error = loads(outcome.error_json())
    assert error["type"] == "builtins.TypeError"
    assert "Traceback" in error["traceback"]


def test_a_rich_return_value_is_stored():
    attempt: Job[Any] = Job(
        id="default:" + "0" * 32,
        name=returns_a_decimal.name,
        queue="default",
        status=JobStatus.RUNNING,
    )
    outcome = run_attempt(returns_a_decimal, attempt)
    assert outcome.ok
    assert loads(outcome.result_json or "") == decimal.Decimal("2.50")


def test_rich_arguments_round_trip_through_delay_and_get_job():
    kwargs = {"when": ROUND_TRIPS[0], "price": decimal.Decimal("19.990"), "day": ROUND_TRIPS[4]}
    queued = echo.delay(*ROUND_TRIPS, **kwargs)
    back = get_job(queued.id)
    assert back is not None
    assert back.problems == []
    assert back.args == ROUND_TRIPS
    assert [type(a) for a in back.args] == [type(a) for a in ROUND_TRIPS]
    assert back.kwargs == kwargs
    assert str(back.kwargs["price"]) == "19.990"


def test_a_non_json_argument_at_delay_writes_nothing(redis_client: redis.Redis):
    echo.delay(1)  # the queue exists; its keys are there
    before = redis_client.dbsize()
    with pytest.raises(TypeError, match=r"job argument at position 1 cannot be sent as JSON"):
        echo.delay(1, object())
    with pytest.raises(TypeError, match=r"job argument 'when'"):
        typed.delay(1, when={1, 2})
    assert redis_client.dbsize() == before
