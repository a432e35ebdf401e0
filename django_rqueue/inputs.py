"""What a job that waited receives: each input's value (its result, or a
:class:`~.dependencies.DependencyFailed`) and the value put in front of its own arguments.

The stored formats are read by :mod:`~django_rqueue.dependencies`; this module turns them
into what the job function gets. It touches no Redis.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

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
from .engine.connection import as_text
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


#: What a dependent does when an input did not succeed (``on_dependency_failure``).
OnFailure = Literal["cancel", "run"]


@dataclass(frozen=True, slots=True)
class Inputs:
    """A dependent's inputs as its record holds them (:attr:`.Job.inputs`): a job that
    waits for others, or waited.

    Counts come from the record's own fields (``dn``, ``dw``, ``df``, ``dc``), kept by the
    Lua scripts as each input ends; :attr:`arrivals` holds the values themselves.
    """

    #: The inputs' job ids, in index order (``()`` when the record does not list them: a
    #: workflow's finisher, whose inputs are the workflow's nodes).
    ids: tuple[str, ...]
    #: Number of inputs (indices ``1`` .. ``count``).
    count: int
    #: Inputs not arrived yet, the gate included while it is closed (``0`` once decided).
    missing: int
    #: Inputs that arrived failed (after their last attempt), and cancelled (cancelled,
    #: expired, deleted).
    failed: int
    cancelled: int
    #: ``"cancel"``: it is cancelled (``dependency_failed``) when an input did not succeed;
    #: ``"run"``: it runs and gets a :class:`~.dependencies.DependencyFailed` in its place.
    on_failure: OnFailure
    #: How its inputs' values are put in front of its arguments (``"L"``: the list; JSON:
    #: a tree of input indices); ``None``: nothing is (``.si()``, ``pass_results=False``).
    pass_shape: str | None
    #: Each arrival by input index (``0``: the gate), tombstones included.
    arrivals: Mapping[int, Arrival]

    @classmethod
    def of(cls, fields: Mapping[str, bytes | str]) -> Inputs | None:
        """The inputs of a job hash (field names as text); ``None`` for a job without any
        (no ``dn`` field: a plain job).

        Raises:
            ValueError: a count that is not a whole number, or an arrival that is not one.
        """
        count_field = fields.get(JobFields.INPUT_COUNT)
        if count_field is None:
            return None
        count = _whole(fields, JobFields.INPUT_COUNT)
        arrivals: dict[int, Arrival] = {}
        # Bounded by the fields present: a corrupt count (10**9) costs nothing.
        for k in range(min(count, len(fields)) + 1):
            raw = fields.get(JobFields.input_part(k))
            if raw is not None:
                arrivals[k] = decode(raw)
        ids = as_text(fields.get(JobFields.INPUT_IDS))
        return cls(
            ids=tuple(ids.split(" ")) if ids else (),
            count=count,
            missing=_whole(fields, JobFields.INPUTS_MISSING),
            failed=_whole(fields, JobFields.INPUTS_FAILED),
            cancelled=_whole(fields, JobFields.INPUTS_CANCELLED),
            on_failure="run" if as_text(fields.get(JobFields.ON_DEPENDENCY_FAILURE)) else "cancel",
            pass_shape=as_text(fields[JobFields.PASS_SHAPE])
            if JobFields.PASS_SHAPE in fields
            else None,
            arrivals=arrivals,
        )

    def id_of(self, k: int) -> str:
        """Input ``k``'s job id (``""`` when the record does not list it)."""
        return self.ids[k - 1] if 1 <= k <= len(self.ids) else ""

    def values(self) -> list[Any]:
        """The value of each input ``1`` .. :attr:`count`, in index order, as
        :func:`input_value` gives them.

        Raises:
            ValueError: an input has not arrived (a tombstone, or no field), or its value
                does not decode.
        """
        values: list[Any] = []
        for k in range(1, self.count + 1):
            arrival = self.arrivals.get(k)
            if arrival is None or not arrival.arrived:
                raise ValueError(f"input {k} has not arrived")
            values.append(input_value(arrival, self.id_of(k)))
        return values


def inputs_of(fields: Mapping[str, bytes | str]) -> list[Any]:
    """The value of each input ``1`` .. ``dn`` of a job hash (field names as text), in index
    order (:meth:`Inputs.values`); ``[]`` for a job without inputs.

    Raises:
        ValueError: as :meth:`Inputs.of` and :meth:`Inputs.values`.
    """
    inputs = Inputs.of(fields)
    return inputs.values() if inputs is not None else []


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


def _whole(fields: Mapping[str, bytes | str], name: str) -> int:
    """The whole-number field ``name`` (absent: 0), as the scripts write it."""
    value = fields.get(name)
    if value is None:
        return 0
    raw = value.encode() if isinstance(value, str) else value
    if not canonical(raw):
        raise ValueError(f"field {name!r} is not a whole number: {raw[:20]!r}")
    return int(raw)
