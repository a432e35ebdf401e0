"""The wire format of dependencies (edge entries, arrival values) and what a dependent receives.

A job that waits for others (a node of a workflow, or a job enqueued with
``using(depends_on=...)``) is a *dependent*; the jobs it waits for are its *inputs*,
numbered ``1`` .. ``dn`` (:attr:`~django_rqueue.engine.fields.JobFields.INPUT_COUNT`; input
``0`` is the gate of a creation in several steps). The Lua scripts write both formats
below and this module reads them (``include/outcome.lua`` builds arrival values with the
same concatenations, no ``cjson``); it touches no Redis.

**Edge entry** (in an input's :attr:`~django_rqueue.engine.fields.JobFields.DEPENDENTS`
field, entries separated by one space, and in its ``next:<job id>`` list), :class:`Edge`::

    <copy><path><k>:<dependent id>          e.g.  pi3:io:AbC...

- ``copy``: ``p`` copies the outcome's body (the result, or the error record) into the
  dependent; ``c`` delivers the outcome only (kind, token, reason, name);
- ``path``: ``i`` the dependent is on the same queue (the ending script updates it
  itself), ``o`` through the input's queue's ``outbox``;
- ``k``: the dependent's input index (``1`` or more, no leading zero).

Two more tokens may stand in the field: :data:`LINKED` (``+``: also deliver to the
``next:<job id>`` list) and, alone on a workflow's finisher, :data:`FINISHER` (``w``).

**Arrival value** (the dependent's field ``i:<k>``, and an outbox entry's ``v``),
:class:`Arrival`; ``<token>`` is the input's fencing token when it ended, and lengths
count UTF-8 bytes (Lua's ``#``)::

    s<token>:<result>                                succeeded
    f<token>:<len(name)>:<name><error record>        failed (after its last attempt)
    c<token>:<reason>:<len(name)>:<name>             cancelled, expired, deleted
    g0:                                              the gate opened
    r<token>                                         not arrived: re-armed (a tombstone)

The result and the error record are as stored, so encrypted ones stay encrypted until
:func:`~.inputs.input_value` opens them; both are empty on a ``c`` edge. A tombstone accepts only
an outcome whose token is greater (a later run's). A job that runs with inputs gets, in
front of its own arguments, the value :func:`~.inputs.prepend` builds from its
:attr:`~django_rqueue.engine.fields.JobFields.PASS_SHAPE`: each input's result, or a
:class:`DependencyFailed` in place of an input that did not succeed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, cast

from .engine.keys import queue_of
from .exceptions import RqueueError

#: The kind of an arrival: succeeded, failed, cancelled, the gate, a tombstone.
ArrivalKind = Literal["s", "f", "c", "g", "r"]
#: What an edge delivers: ``p`` the outcome with its body, ``c`` the outcome only.
EdgeCopy = Literal["p", "c"]
#: How an edge reaches its dependent: ``i`` inline (same queue), ``o`` through the outbox.
EdgePath = Literal["i", "o"]
#: How :class:`DependencyFailed` says an input ended.
DependencyStatus = Literal["failed", "cancelled", "expired"]

#: The kind of an input that succeeded.
SUCCEEDED: Final = "s"
#: The kind of an input that failed after its last attempt.
FAILED: Final = "f"
#: The kind of an input that was cancelled, expired or deleted.
CANCELLED: Final = "c"
#: The kind of the gate's opening (input ``0``).
GATE: Final = "g"
#: The kind of a tombstone: an input re-armed by ``retry_failed()``, not arrived.
TOMBSTONE: Final = "r"
#: The entry of :attr:`~django_rqueue.engine.fields.JobFields.DEPENDENTS` that says "also
#: deliver to the dependents linked later, in ``next:<job id>``".
LINKED: Final = "+"
#: The single entry of a workflow finisher's dependents: its end marks the workflow record.
FINISHER: Final = "w"
#: The value :attr:`~django_rqueue.engine.fields.JobFields.PASS_SHAPE` holds to pass the
#: list of every input's value, in index order.
EVERY_INPUT: Final = "L"

_KINDS = frozenset("sfcgr")
_DIGITS = frozenset(b"0123456789")
#: Python's bound on the digits of an ``int()`` of text (``sys.get_int_max_str_digits``)
#: is far above any token; a shorter bound turns a corrupt value into a clear error.
_MAX_DIGITS = 20


class DependencyFailed(RqueueError):  # noqa: N818 - names what happened to the input
    """An input that did not succeed, passed to its dependent in place of its result.

    A dependent with ``on_dependency_failure="run"`` receives one for each input that
    failed, was cancelled or expired (under ``"cancel"``, the default, it does not run
    at all). It is an exception so that ``isinstance(value, Exception)`` finds it, but
    django-rqueue never raises it: it is a value (raise it to fail the dependent).

    - ``job_id``, ``name``: the input's id and job name (``job_id`` is ``""`` when the
      dependent's record does not list its inputs' ids: a workflow's finisher);
    - ``status``: ``"failed"`` (after its last attempt), ``"expired"`` (its ``expires=``
      came before it started), ``"cancelled"`` (any other cancel);
    - ``error_type``, ``message``: for a failure, the ``"type"`` and ``"message"`` of its
      last error record (the traceback is left out; both ``""`` when the edge carried no
      body); for a cancel, ``error_type`` is ``""`` and ``message`` the stored cancel
      reason (``"dependency_failed"``, ``"dependency_timeout"``, ``"workflow_cancelled"``,
      ``"deleted"``, ``"expired"``; ``""`` for ``Job.cancel()``).

    Two are equal when their five fields are.
    """

    def __init__(
        self,
        job_id: str,
        name: str,
        status: DependencyStatus,
        error_type: str = "",
        message: str = "",
    ) -> None:
        super().__init__(job_id, name, status, error_type, message)
        self.job_id = job_id
        self.name = name
        self.status: DependencyStatus = status
        self.error_type = error_type
        self.message = message

    def __str__(self) -> str:
        what = f"{self.error_type}: {self.message}" if self.error_type else self.message
        return f"dependency {self.name} ({self.job_id or '?'}) {self.status}" + (
            f": {what}" if what else ""
        )

    def __repr__(self) -> str:
        return f"DependencyFailed{self.args!r}"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DependencyFailed):
            return NotImplemented
        return self.args == other.args

    def __hash__(self) -> int:
        return hash(self.args)


@dataclass(frozen=True, slots=True)
class Edge:
    """One edge entry: the input it is stored on delivers its outcome to ``dependent``."""

    copy: EdgeCopy
    path: EdgePath
    #: The dependent's input index, ``1`` or more.
    index: int
    #: The dependent's job id (its queue is :func:`~django_rqueue.engine.keys.queue_of` it).
    dependent: str

    def encode(self) -> str:
        """The entry as stored (``ValueError`` for an index below 1 or an id that is not one)."""
        if self.copy not in ("p", "c") or self.path not in ("i", "o"):
            raise ValueError(f"edge copy/path must be p|c and i|o: {self.copy!r}, {self.path!r}")
        if self.index < 1:
            raise ValueError(f"edge input index must be 1 or more: {self.index}")
        if queue_of(self.dependent) is None or " " in self.dependent:
            raise ValueError(f"edge dependent is not a job id: {self.dependent!r}")
        return edge_entry(self.copy, self.path, self.index, self.dependent)

    @classmethod
    def decode(cls, entry: str) -> Edge:
        """Read an entry :meth:`encode` wrote.

        Raises:
            ValueError: not an edge entry (:data:`LINKED` and :data:`FINISHER` are not).
        """
        head, sep, dependent = entry.partition(":")
        copy, path, digits = head[:1], head[1:2], head[2:]
        if (
            not sep
            or copy not in ("p", "c")
            or path not in ("i", "o")
            or not canonical(digits.encode(), positive=True)
            or queue_of(dependent) is None
        ):
            raise ValueError(f"not an edge entry: {entry[:80]!r}")
        return cls(cast(EdgeCopy, copy), cast(EdgePath, path), int(digits), dependent)


def edge_entry(copy: EdgeCopy, path: EdgePath, index: int, dependent: str) -> str:
    """The entry of an edge, unchecked (:meth:`Edge.encode` checks; a compile whose ids
    are its own calls this for its thousands of edges)."""
    return f"{copy}{path}{index}:{dependent}"


@dataclass(frozen=True, slots=True)
class Dependents:
    """What an input's :attr:`~django_rqueue.engine.fields.JobFields.DEPENDENTS` field holds."""

    edges: tuple[Edge, ...] = ()
    #: :data:`LINKED` is there: dependents were linked later, in ``next:<job id>``.
    linked: bool = False
    #: :data:`FINISHER` is there: the job is a workflow's finisher.
    finisher: bool = False

    def encode(self) -> str:
        """The field's value (``""`` when there is nothing: then the field is left out)."""
        entries = [edge.encode() for edge in self.edges]
        entries += [LINKED] * self.linked + [FINISHER] * self.finisher
        return " ".join(entries)

    @classmethod
    def decode(cls, value: bytes | str) -> Dependents:
        """Read the field (``ValueError`` for an entry that is not one)."""
        text = value.decode() if isinstance(value, bytes) else value
        edges: list[Edge] = []
        linked = finisher = False
        for entry in text.split(" "):
            if entry == LINKED:
                linked = True
            elif entry == FINISHER:
                finisher = True
            elif entry:
                edges.append(Edge.decode(entry))
        return cls(tuple(edges), linked, finisher)


@dataclass(frozen=True, slots=True)
class Arrival:
    """One input's outcome as its dependent records it (the field ``i:<k>``).

    ``body``: for :data:`SUCCEEDED` the result, for :data:`FAILED` the last error record,
    each as stored (JSON, or encrypted), ``""`` on a ``c`` edge; ``name``: the input's job
    name (failed, cancelled); ``reason``: a cancel's stored reason (``""``: ``cancel()``).
    """

    kind: ArrivalKind
    token: int
    body: str = ""
    name: str = ""
    reason: str = ""

    @property
    def arrived(self) -> bool:
        """Whether it counts as arrived (a tombstone does not)."""
        return self.kind != TOMBSTONE

    @property
    def succeeded(self) -> bool:
        return self.kind == SUCCEEDED

    def encode(self) -> str:
        """The value as stored (what ``include/outcome.lua`` writes)."""
        if self.token < 0:
            raise ValueError(f"arrival token must be 0 or more: {self.token}")
        if self.kind == SUCCEEDED:
            return f"s{self.token}:{self.body}"
        if self.kind == FAILED:
            return f"f{self.token}:{_length(self.name)}:{self.name}{self.body}"
        if self.kind == CANCELLED:
            if ":" in self.reason:
                raise ValueError(f"a cancel reason has no ':': {self.reason!r}")
            return f"c{self.token}:{self.reason}:{_length(self.name)}:{self.name}"
        if self.kind == GATE:
            return "g0:"
        if self.kind == TOMBSTONE:
            return f"r{self.token}"
        raise ValueError(f"unknown arrival kind {self.kind!r}")


#: The arrival that opens a gate (input ``0``).
GATE_OPEN: Final = Arrival(GATE, 0)


def decode(value: bytes | str) -> Arrival:
    """Read an arrival value (the field ``i:<k>``, an outbox entry's ``v``).

    Raises:
        ValueError: the value is not one (corrupt data): an unknown kind, a token or a
            length that is not a whole number, a name shorter than its length, text that
            is not UTF-8.
    """
    data = value.encode() if isinstance(value, str) else value
    kind = data[:1].decode("ascii", "replace")
    try:
        if kind not in _KINDS:
            raise ValueError("unknown kind")
        if kind == TOMBSTONE:
            if not canonical(data[1:]):
                raise ValueError("bad token")
            return Arrival(TOMBSTONE, int(data[1:]))
        token, rest = _number(data, 1)
        if kind == SUCCEEDED:
            return Arrival(SUCCEEDED, token, rest.decode())
        if kind == GATE:
            if token != 0 or rest:
                raise ValueError("a gate is g0:")
            return GATE_OPEN
        if kind == CANCELLED:
            reason, sep, rest = rest.partition(b":")
            if not sep:
                raise ValueError("no reason")
            name, tail = _named(rest)
            if tail:
                raise ValueError("bytes after the name")
            return Arrival(CANCELLED, token, name=name, reason=reason.decode())
        name, tail = _named(rest)
        return Arrival(FAILED, token, tail.decode(), name=name)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"not an arrival value ({exc}): {data[:80]!r}") from None


def _length(name: str) -> int:
    return len(name.encode())


def canonical(digits: bytes, positive: bool = False) -> bool:
    """Whether ``digits`` is a whole number as Lua's ``tostring`` writes it (no sign, no
    leading zero, at most ``_MAX_DIGITS`` (20) digits; ``0`` only when not ``positive``)."""
    if not digits or len(digits) > _MAX_DIGITS or not set(digits) <= _DIGITS:
        return False
    if digits[:1] == b"0":
        return digits == b"0" and not positive
    return True


def _number(data: bytes, start: int) -> tuple[int, bytes]:
    """The whole number at ``data[start:]`` up to the next ``:``, and what follows it."""
    end = data.find(b":", start)
    if end < 0 or not canonical(data[start:end]):
        raise ValueError("bad number")
    return int(data[start:end]), data[end + 1 :]


def _named(data: bytes) -> tuple[str, bytes]:
    """``<len>:<name>`` at the start of ``data``: the name, and the bytes after it."""
    length, rest = _number(data, 0)
    if len(rest) < length:
        raise ValueError("name shorter than its length")
    return rest[:length].decode(), rest[length:]
