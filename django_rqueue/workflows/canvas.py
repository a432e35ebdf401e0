"""Composition of signatures into workflows: ``chain``, ``group``, ``chord`` and ``|``.

A workflow is made of *elements*: a :class:`~django_rqueue.workflows.signature.Signature`
(one job), a :class:`Chain` (each element after the previous one has ended) or a
:class:`Group` (its members side by side). ``a | b`` chains any two elements; a
:func:`chord` is a group followed by a body. A canvas (a chain or a group) at the top of a
workflow also carries the workflow's options: :meth:`Canvas.on_error`,
:meth:`Canvas.on_complete` and :meth:`Canvas.using` (``dependency_timeout``).

Composition rules (how :func:`django_rqueue.workflows.graph.compile` reads them):

- after an element, a signature made with ``.s()`` gets that element's output first: a
  signature's result, or a group's list of its members' outputs in member order (a group
  of one is still a list; a group inside a group gives a nested list); ``.si()`` gets
  nothing (its inputs stay readable from the context);
- ``group()`` of nothing is allowed: its output is ``[]``, ready as soon as what comes
  before it has ended;
- a chain of chains is one chain; the options of a canvas are allowed only at the top.

:meth:`Canvas.delay` compiles the workflow (every argument checked and encoded, nothing
written before that) and hands it to :func:`submit`, the one place that writes it.

Imports: this module imports no other module of ``workflows`` but :mod:`.graph` (for
:meth:`Canvas.delay`); :mod:`.signature` builds on :class:`Element`.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable
from typing import Any, ClassVar, Literal, Self

from ..options import NoTimeout, dependency_timeout_value, using_options
from . import graph
from .nodes import WorkflowPlan

#: What an element is: one job, a chain, a group.
ElementKind = Literal["signature", "chain", "group"]


class Element:
    """Anything a workflow is made of; ``a | b`` chains two elements."""

    kind: ClassVar[ElementKind]

    def __or__(self, other: Element) -> Chain:
        if not isinstance(other, Element):
            return NotImplemented
        return chain(self, other)


@dataclasses.dataclass(frozen=True, eq=False)
class Canvas(Element):
    """A chain or a group, and, at the top of a workflow, the workflow's options."""

    #: The elements, in the order they were declared.
    members: tuple[Element, ...]
    #: A signature enqueued once when the workflow ends ``failed`` (not on ``cancel()``); it
    #: gets the workflow id first unless made with ``.si()``.
    error_callback: Element | None = None
    #: A signature enqueued once when every node has ended, whatever the outcome.
    complete_callback: Element | None = None
    #: Seconds each waiting node waits for its inputs at most (from the creation, Redis
    #: clock); ``NO_TIMEOUT``: no limit; ``None``: ``RQUEUE["WORKFLOW_DEPENDENCY_TIMEOUT"]``.
    dependency_timeout: float | NoTimeout | None = None

    @property
    def has_options(self) -> bool:
        """Whether a callback or a dependency timeout is set (only allowed at the top)."""
        return (
            self.error_callback is not None
            or self.complete_callback is not None
            or self.dependency_timeout is not None
        )

    def on_error(self, signature: Element) -> Self:
        """A copy whose workflow enqueues ``signature`` once if it ends ``failed``.

        Raises:
            TypeError: ``signature`` is not a signature (``job.s(...)``/``job.si(...)``).
        """
        return dataclasses.replace(self, error_callback=_callback("on_error", signature))

    def on_complete(self, signature: Element) -> Self:
        """A copy whose workflow enqueues ``signature`` once every node has ended (after
        retries), whatever the outcome, an explicit ``cancel()`` included.

        Raises:
            TypeError: ``signature`` is not a signature.
        """
        return dataclasses.replace(self, complete_callback=_callback("on_complete", signature))

    def using(
        self, *, dependency_timeout: float | datetime.timedelta | NoTimeout | None = None
    ) -> Self:
        """A copy with the workflow's options: ``dependency_timeout`` (seconds, a
        ``timedelta`` or ``NO_TIMEOUT``) bounds how long each of its nodes waits for its
        inputs, counted from the creation (a node's own options go on its signature).

        Raises:
            ValueError: a timeout that is not a number of seconds > 0 or ``NO_TIMEOUT``.
        """
        timeout = dependency_timeout_value(dependency_timeout)
        using_options(dependency_timeout=timeout)  # the same check as a job's
        return dataclasses.replace(self, dependency_timeout=timeout)

    def delay(self) -> Any:
        """Create the workflow and return its handle.

        Every node's arguments are checked and encoded first
        (:func:`~django_rqueue.workflows.graph.compile`): an invalid one raises and
        nothing is written. Then :func:`submit` writes it.

        Raises:
            TypeError: arguments that do not fit a job's signature or that JSON cannot
                carry; an element that is not one.
            ValueError: an option a workflow node cannot take (``unique_key``,
                ``job_id``, ...), an undeclared queue, arguments over
                ``RQUEUE["MAX_PAYLOAD_BYTES"]``.
            WorkflowNotCreated: Redis could not be reached for longer than
                ``ENQUEUE_PATIENCE`` (``committed`` says whether it will run).
        """
        return submit(graph.compile(self))


@dataclasses.dataclass(frozen=True, eq=False)
class Chain(Canvas):
    """Elements one after the other: each runs once the previous one has ended."""

    kind: ClassVar[ElementKind] = "chain"

    def __repr__(self) -> str:
        return " | ".join(repr(m) for m in self.members)


@dataclasses.dataclass(frozen=True, eq=False)
class Group(Canvas):
    """Elements side by side; their outputs form a list in member order."""

    kind: ClassVar[ElementKind] = "group"

    def __repr__(self) -> str:
        return f"group({', '.join(repr(m) for m in self.members)})"


def chain(*elements: Element) -> Chain:
    """The elements one after the other (``a | b | c``); a chain without options inside it
    is flattened into it.

    Raises:
        TypeError: an element is not one.
        ValueError: no element.
    """
    if not elements:
        raise ValueError("chain() needs at least one element")
    members: list[Element] = []
    for element in _elements("chain", elements):
        if isinstance(element, Chain) and not element.has_options:
            members += element.members
        else:
            members.append(element)
    return Chain(tuple(members))


def group(*elements: Element | Iterable[Element]) -> Group:
    """The elements side by side: ``group(a, b)`` or ``group(iterable)``; ``group()`` is an
    empty group (its output is ``[]``).

    Raises:
        TypeError: an element is not one.
    """
    if len(elements) == 1 and not isinstance(elements[0], Element):
        candidates: object = elements[0]
        if isinstance(candidates, str | bytes) or not isinstance(candidates, Iterable):
            raise TypeError(_not_an_element("group", candidates))
        return Group(tuple(_elements("group", list(candidates))))
    return Group(tuple(_elements("group", elements)))


def chord(header: Group | Iterable[Element], body: Element) -> Chain:
    """``header`` (a group, or an iterable of elements) side by side, then ``body``, which
    gets the list of their outputs (``chain(group(header), body)``).

    Raises:
        TypeError: the header or the body is not made of elements.
    """
    if not isinstance(body, Element):
        raise TypeError(_not_an_element("chord body", body))
    head = header if isinstance(header, Group) else group(header)
    return chain(head, body)


def submit(plan: WorkflowPlan) -> Any:
    """Write ``plan`` and return the workflow's handle (:func:`.create.submit`, imported on
    use: the creation imports ``enqueue``, which this module's importers may be loading).

    Raises what :func:`.create.submit` raises.
    """
    from .create import submit as create

    return create(plan)


def _elements(where: str, elements: Iterable[object]) -> list[Element]:
    checked: list[Element] = []
    for element in elements:
        if not isinstance(element, Element):
            raise TypeError(_not_an_element(where, element))
        checked.append(element)
    return checked


def _not_an_element(where: str, value: object) -> str:
    return (
        f"{where}() takes signatures (job.s(...), job.si(...)), chains and groups, "
        f"got {value!r:.80}"
    )


def _callback(where: str, signature: Element) -> Element:
    if not isinstance(signature, Element) or signature.kind != "signature":
        raise TypeError(
            f"{where}() takes a signature (job.s(...) or job.si(...)), got {signature!r:.80}"
        )
    return signature
