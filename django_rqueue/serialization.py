"""JSON encoding of job arguments and results. Never pickle.

The rule (the README's "Arguments and results are JSON" says the same):

- ``None``, ``bool``, ``int``, finite ``float``, ``str``, ``list`` and ``dict``
  round-trip as they are.
- As in ``django.tasks`` (whose ``normalize_json`` makes any sequence a list,
  and whose backends store JSON), and as Python's ``json`` writes them: a
  ``tuple`` reads back as a ``list``, and a dict key that is an ``int``,
  ``float``, ``bool`` or ``None`` reads back as its JSON text (``1`` ->
  ``"1"``, ``2.5`` -> ``"2.5"``, ``True`` -> ``"true"``, ``None`` -> ``"null"``).
- On top of JSON, ``datetime``, ``date``, ``time``, ``Decimal`` and ``UUID``
  round-trip exactly (microseconds and UTC offsets included) as tagged objects
  ``{"__rqueue__": "<type>", "v": "<ISO string>"}``; a dict of exactly that
  shape passed by the caller would read back as the tagged type. Lazy
  translation strings (``gettext_lazy``) are sent as plain ``str``.
- Anything else raises ``TypeError`` naming the argument, before anything is
  written to Redis: any other dict key (a tuple, say), a set, ``bytes``, NaN or
  an infinity, a value that contains itself, a value nested deeper than
  :data:`MAX_JSON_DEPTH` levels, any other object.

Reading is bounded the same way: :func:`loads` refuses (``ValueError``) JSON
nested deeper than :data:`MAX_JSON_DEPTH` or longer than :data:`MAX_JSON_BYTES`,
so a record written into Redis by someone else cannot make a reader raise
``RecursionError`` or exhaust its memory.
"""

from __future__ import annotations

import datetime
import decimal
import inspect
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from django.utils.functional import Promise

from .conf.defaults import MAX_JSON_BYTES as MAX_JSON_BYTES
from .engine.fields import JobFields

TAG = "__rqueue__"

#: Deepest nesting of lists and objects :func:`dumps` writes and :func:`loads` reads, counted
#: on the whole JSON document (a job's positional arguments are level 1, a list among them
#: level 2...). The default recursion limit of ``serde_json`` (Rust) is also 128, Ruby's
#: ``JSON.parse`` allows 100 and .NET's ``System.Text.Json`` 64 (RFC 8259 §9 lets a parser
#: limit nesting). Deeper values are refused rather than left to Python's recursion limit:
#: CPython's C decoder raises ``RecursionError`` near 10 000 levels (3.13), and pure-Python
#: code that walks a value (``copy.deepcopy``, many serializers) fails far earlier.
MAX_JSON_DEPTH = 128

#: ``bytes.translate`` arguments: braces read as brackets; bytes other than brackets and
#: quotes deleted.
_SAME_BRACKETS = bytes.maketrans(b"{}", b"[]")
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'[]{}"')

_DECODERS: dict[str, Callable[[str], Any]] = {
    "datetime": datetime.datetime.fromisoformat,
    "date": datetime.date.fromisoformat,
    "time": datetime.time.fromisoformat,
    "decimal": decimal.Decimal,
    "uuid": uuid.UUID,
}


class _Encoder(json.JSONEncoder):
    def default(self, o: object) -> object:
        # datetime before date: a datetime is a date.
        if isinstance(o, datetime.datetime):
            return {TAG: "datetime", "v": o.isoformat()}
        if isinstance(o, datetime.date):
            return {TAG: "date", "v": o.isoformat()}
        if isinstance(o, datetime.time):
            return {TAG: "time", "v": o.isoformat()}
        if isinstance(o, decimal.Decimal):
            return {TAG: "decimal", "v": str(o)}
        if isinstance(o, uuid.UUID):
            return {TAG: "uuid", "v": str(o)}
        if isinstance(o, Promise):
            return str(o)
        raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")


def _object_hook(obj: dict[str, Any]) -> Any:  # any tagged type
    if len(obj) == 2 and TAG in obj and "v" in obj:
        decoder = _DECODERS.get(obj[TAG])
        if decoder is not None and isinstance(obj["v"], str):
            try:
                return decoder(obj["v"])
            except (ValueError, ArithmeticError) as exc:  # decimal.InvalidOperation
                raise ValueError(f"undecodable {obj[TAG]} {obj['v'][:40]!r}") from exc
    return obj


def too_deep(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the JSON ``text`` nests lists and objects more than ``limit`` levels deep.

    For an invalid document (unbalanced brackets) it answers for the deepest nesting a
    decoder could enter before finding the error. A document with at most ``limit``
    opening brackets cannot be deeper (two ``str.count`` calls, which :func:`dumps` and
    :func:`loads` make first); otherwise strings are cut out, every character but
    brackets deleted, and pairs of innermost brackets are removed one level per pass (at most
    ``limit + 1`` passes of ``bytes.replace``).
    """
    if text.count("[") + text.count("{") <= limit:
        return False
    if "\\" in text:
        # Escapes occur only in strings: an escaped backslash, then an escaped quote.
        text = text.replace("\\\\", "").replace('\\"', "")
    # Only brackets and quotes are kept; a string without brackets is then two adjacent
    # quotes. Removing any two adjacent quotes keeps the rest alternating open, close.
    kept = text.encode("utf-8", "surrogatepass").translate(_SAME_BRACKETS, _NOT_STRUCTURE)
    kept = kept.replace(b'""', b"")
    brackets = b"".join(kept.split(b'"')[::2]) if b'"' in kept else kept
    for depth in range(1, limit + 2):  # the levels removed after this pass
        inner = brackets.replace(b"[]", b"")
        if len(inner) == len(brackets):
            # Unbalanced: what is left is "]]...[[": its openers enclose what was removed.
            return depth - 1 + brackets.count(b"[") > limit
        if not inner:
            return depth > limit
        brackets = inner
    return True


#: One encoder for every call (``json.dumps(cls=...)`` builds one per call);
#: ``JSONEncoder.encode`` keeps no state between calls, so sharing it is safe.
_ENCODER = _Encoder(allow_nan=False, separators=(",", ":"))


def _c_encoder() -> Callable[[object, int], Sequence[str]] | None:
    """CPython's C encoder with :data:`_ENCODER`'s settings, made once; ``None`` where the
    interpreter has none (``json.encoder.c_make_encoder``, as ``JSONEncoder.iterencode``
    calls it, minus the cycle check: a value that contains itself recurses until Python's
    recursion limit instead, which :func:`dumps` reports as ``ValueError``).

    ``JSONEncoder.encode`` makes this encoder anew on every call: more than half of the
    2.3 µs it takes for a typical ``.delay()``'s arguments, on this project's bench host.
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - CPython has it
        return None
    e = _ENCODER
    encoder: Callable[[object, int], Sequence[str]] = make(
        None, e.default, json.encoder.encode_basestring_ascii, None,
        e.key_separator, e.item_separator, e.sort_keys, e.skipkeys, e.allow_nan,
    )  # fmt: skip
    return encoder


_C_ENCODER = _c_encoder()


def dumps(value: object) -> str:
    """Encode ``value``; raise ``TypeError``/``ValueError`` if JSON cannot carry it
    (``ValueError`` for a value that contains itself, or is nested deeper than
    :data:`MAX_JSON_DEPTH` levels)."""
    try:
        if _C_ENCODER is None:  # pragma: no cover - CPython has it
            text = _ENCODER.encode(value)
        else:
            text = "".join(_C_ENCODER(value, 0))
    except RecursionError as exc:
        raise ValueError("a value contains itself, or is nested too deep, for JSON") from exc
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and too_deep(text):
        raise ValueError(f"a value is nested deeper than {MAX_JSON_DEPTH} levels")
    return text


#: One decoder for every call (``json.loads(object_hook=...)`` builds one per call; a
#: worker decodes every job's arguments). Its scanner keeps no state between calls.
_DECODER = json.JSONDecoder(object_hook=_object_hook)


def loads(data: str | bytes) -> Any:  # decoded JSON
    """Decode what :func:`dumps` produced.

    Raises:
        ValueError: corrupt data: bad JSON, bytes that are not UTF-8, a tagged value
            that does not parse, JSON longer than :data:`MAX_JSON_BYTES` or nested
            deeper than :data:`MAX_JSON_DEPTH` (never ``RecursionError``).
    """
    if len(data) > MAX_JSON_BYTES:
        raise ValueError(
            f"JSON of {len(data)} bytes is longer than the {MAX_JSON_BYTES} bytes "
            "django-rqueue decodes"
        )
    if isinstance(data, bytes):
        data = data.decode()
    if data.count("[") + data.count("{") > MAX_JSON_DEPTH and too_deep(data):
        raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        return _DECODER.decode(data)
    except RecursionError as exc:  # pragma: no cover - too_deep() refuses such input first
        raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels") from exc


def encode_arguments(
    args: Sequence[object],
    kwargs: Mapping[str, object],
    func: Callable[..., object] | None = None,
    *,
    skip: int = 0,
) -> str:
    """Encode a job's arguments: ``[...]`` (positional only) or ``{"a": [...], "k": {...}}``.

    The bare array is the common case's shorter form (13 bytes less per job
    record, see ``bench/README.md``); :func:`decode_arguments` reads both.

    Raises:
        TypeError: an argument cannot be carried by JSON. The message names
            the argument (its parameter name when ``func``'s signature tells
            it, else its position or keyword). ``skip``: how many leading
            parameters of ``func`` are not carried (1 for the ``JobContext``
            of a ``takes_context`` job).
    """
    try:
        if not kwargs:
            return dumps(args if type(args) in (list, tuple) else list(args))
        return dumps({"a": list(args), "k": dict(kwargs)})
    except (TypeError, ValueError) as exc:
        raise TypeError(_which_argument(args, kwargs, func, exc, skip)) from exc


def _which_argument(
    args: Sequence[object],
    kwargs: Mapping[str, object],
    func: Callable[..., object] | None,
    exc: Exception,
    skip: int = 0,
) -> str:
    names: list[str] = []
    if func is not None:
        try:
            names = [
                p.name
                for p in inspect.signature(func).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            ][skip:]
        except (TypeError, ValueError):
            names = []
    for index, value in enumerate(args):
        try:
            dumps(value)
        except (TypeError, ValueError) as inner:
            label = (
                f"{names[index]!r} (position {index})"
                if index < len(names)
                else f"at position {index}"
            )
            return f"job argument {label} cannot be sent as JSON: {inner}"
    for key, value in kwargs.items():
        try:
            dumps(value)
        except (TypeError, ValueError) as inner:
            return f"job argument {key!r} cannot be sent as JSON: {inner}"
    return f"job arguments cannot be sent as JSON: {exc}"


def decode_arguments(payload: str | bytes) -> tuple[list[Any], dict[str, Any]]:
    """Decode what :func:`encode_arguments` produced: ``(args, kwargs)``.

    Raises:
        ValueError: the payload is not valid JSON of either shape.
    """
    data = loads(payload)
    if isinstance(data, list):
        return data, {}
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("a"), list)
        or not isinstance(data.get("k"), dict)
    ):
        raise ValueError(
            "job payload is neither an array of arguments nor an object with an 'a' list "
            "and a 'k' dict"
        )
    return data["a"], data["k"]


def join_payload(fields: Mapping[str, bytes | str]) -> bytes:
    """Return a job hash's payload: ``p`` followed by ``p:2``, ``p:3``, ... (``JobFields``).

    ``fields`` maps field names (``str``) to values as read with ``HGETALL``.
    ``enqueue_job.lua`` stores a payload of 65..1071 bytes in 63-byte parts so
    the job hash keeps Redis's compact listpack encoding (every value at most
    ``hash-max-listpack-value``, 64 bytes by default); any other payload is
    the single field ``p``. A missing payload reads as ``b""``.
    """
    parts: list[bytes] = []
    value = fields.get(JobFields.PAYLOAD)
    part = 2
    while value is not None:
        parts.append(value.encode() if isinstance(value, str) else value)
        value = fields.get(JobFields.payload_part(part))
        part += 1
    return b"".join(parts)


def encode_result(value: object) -> str:
    """Encode a job's return value; ``TypeError`` names the offending type, or says the
    JSON is longer than the :data:`MAX_JSON_BYTES` a reader decodes."""
    try:
        text = dumps(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"job return value cannot be stored as JSON: {exc}") from exc
    if len(text) > MAX_JSON_BYTES:
        raise TypeError(
            f"job return value cannot be stored as JSON: it takes {len(text)} bytes, more "
            f"than the {MAX_JSON_BYTES} bytes django-rqueue decodes"
        )
    return text
