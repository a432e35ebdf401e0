"""What a job that waited receives: each input's value (its result, or a
:class:`~.dependencies.DependencyFailed`) and the value put in front of its own arguments.

The stored formats are read by :mod:`~django_rqueue.dependencies`; this module turns them
into what the job function gets. It touches no Redis.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .dependencies import (
    CANCELLED,
    EVERY_INPUT,
    FAILED,
    SUCCEEDED,
    Arrival,
    DependencyFailed,
    DependencyStatus,
    canonical,
    decode,
)
from .encryption import sealed, unseal
from .engine.fields import JobFields
from .serialization import loads


def input_value(arrival: Arrival, job_id: str = "") -> Any:  # the input's result
    """What a dependent receives for one input: its decoded result when it succeeded
    (``None`` on a ``c`` edge), else a :class:`DependencyFailed` (``job_id``: the input's).

    Raises:
        ValueError: a result that does not decode (corrupt, or encrypted with no key that
            opens it), or an arrival that is not an outcome (the gate, a tombstone).
    """
    if arrival.kind == SUCCEEDED:
        if not arrival.body:
            return None
        body: bytes | str = arrival.body
        if sealed(body):
            try:
                body = unseal(body)
            except ValueError as exc:
                raise ValueError(str(exc).format(what="inputs")) from None
        return loads(body)
    if arrival.kind == FAILED:
        error_type, message = _error_of(arrival.body)
        return DependencyFailed(job_id, arrival.name, "failed", error_type, message)
    if arrival.kind == CANCELLED:
        status: DependencyStatus = "expired" if arrival.reason == "expired" else "cancelled"
        return DependencyFailed(job_id, arrival.name, status, "", arrival.reason)
    raise ValueError(f"not an input's outcome: {arrival.encode()!r}")


def inputs_of(fields: Mapping[str, bytes | str]) -> list[Any]:
    """The value of each input ``1`` .. ``dn`` of a job hash (field names as text), in index
    order, as :func:`input_value` gives them; ``[]`` for a job without inputs.

    Raises:
        ValueError: an input has not arrived (a tombstone, or no field), or its value does
            not decode; ``dn`` is not a whole number.
    """
    count = fields.get(JobFields.INPUT_COUNT)
    if count is None:
        return []
    raw_count = count.encode() if isinstance(count, str) else count
    if not canonical(raw_count):
        raise ValueError(f"input count is not a whole number: {raw_count[:20]!r}")
    ids_field = fields.get(JobFields.INPUT_IDS, "")
    ids = (ids_field.decode() if isinstance(ids_field, bytes) else ids_field).split(" ")
    values: list[Any] = []
    for k in range(1, int(raw_count) + 1):
        raw = fields.get(JobFields.input_part(k))
        arrival = None if raw is None else decode(raw)
        if arrival is None or not arrival.arrived:
            raise ValueError(f"input {k} has not arrived")
        values.append(input_value(arrival, ids[k - 1] if k <= len(ids) else ""))
    return values


def prepend(shape: bytes | str, inputs: Sequence[Any]) -> Any:  # the inputs' values, arranged
    """The value a job that waited gets in front of its own arguments.

    ``shape`` is its :attr:`~django_rqueue.engine.fields.JobFields.PASS_SHAPE`: ``"L"`` the
    list of ``inputs``; else JSON: an input index ``k`` (1-based) is ``inputs[k - 1]``,
    a list of indices and lists the same list of values (``"[[1,2],3]"`` is
    ``[[inputs[0], inputs[1]], inputs[2]]``; ``"[]"`` an empty list). ``inputs`` are the
    values :func:`inputs_of` gives. The caller prepends nothing when the field is absent.

    Raises:
        ValueError: a shape that is not one, or names an input beyond ``inputs``.
    """
    text = shape.decode() if isinstance(shape, bytes) else shape
    if text == EVERY_INPUT:
        return list(inputs)
    try:
        tree = loads(text)
    except ValueError as exc:
        raise ValueError(f"not a pass shape ({exc}): {text[:80]!r}") from None
    return _arrange(tree, inputs, text)


def _arrange(tree: object, inputs: Sequence[Any], shape: str) -> Any:
    if isinstance(tree, list):
        return [_arrange(node, inputs, shape) for node in tree]
    if type(tree) is int and 1 <= tree <= len(inputs):
        return inputs[tree - 1]
    raise ValueError(
        f"pass shape {shape[:80]!r} names {tree!r}, not an input index 1..{len(inputs)}"
    )


def _error_of(body: str) -> tuple[str, str]:
    """``(type, message)`` of an error record as stored; ``("", "")`` when empty, and a
    message saying why when it cannot be read (never raises: the input's failure stays
    a failure whatever its record holds)."""
    if not body:
        return "", ""
    data: bytes | str = body
    try:
        if sealed(data):
            data = unseal(data)
        record = loads(data)
    except ValueError as exc:
        return "", f"(unreadable error record: {str(exc).format(what='errors')})"
    if not isinstance(record, dict):
        return "", "(unreadable error record: not an object)"
    return _text(record.get("type")), _text(record.get("message"))


def _text(value: object) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)
