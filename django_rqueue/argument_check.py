"""A job function's signature, ready to check the arguments of each enqueue.

:mod:`django_rqueue.decorators` re-exports :class:`ArgumentCheck`.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any


@dataclasses.dataclass(frozen=True, slots=True)
class ArgumentCheck:
    """A job function's signature, ready to check the arguments of each enqueue.

    The common calls are accepted by a few comparisons: positional arguments
    only, as many as the function takes; or keyword arguments that each name a
    parameter not given positionally, with every required parameter given
    (for a function without ``**kwargs``). Any other call is checked by
    ``inspect.Signature.bind``, which raises the error.
    """

    #: The parameters the caller passes (the context of a ``takes_context`` job left out).
    signature: inspect.Signature
    #: The parameters as the error message shows them, without annotations: ``"(a, b=1)"``.
    shown: str
    #: A call with no keyword arguments and ``fewest <= len(args) <= most`` positional
    #: ones binds (``most`` is ``sys.maxsize`` with ``*args``; ``fewest`` is above
    #: ``most`` when a keyword-only parameter is required).
    fewest: int
    most: int
    #: Each parameter a keyword may name -> its position (``sys.maxsize`` for a
    #: keyword-only one); ``None`` with ``**kwargs`` (such calls go to ``bind``).
    slots: Mapping[str, int] | None
    #: ``(position, name)`` of every required parameter (``sys.maxsize``: keyword-only).
    required: tuple[tuple[int, str], ...]

    @classmethod
    def of(cls, func: Callable[..., object], *, skip: int = 0) -> ArgumentCheck | None:
        """The check of ``func`` minus its first ``skip`` parameters; ``None`` when its
        signature cannot be read (some builtins and classes): such calls are not checked."""
        try:
            parameters = list(inspect.signature(func).parameters.values())[skip:]
        except (TypeError, ValueError):
            return None
        kinds = inspect.Parameter
        positional = [
            p for p in parameters if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)
        ]
        varargs = any(p.kind is kinds.VAR_POSITIONAL for p in parameters)
        most = sys.maxsize if varargs else len(positional)
        slots: dict[str, int] = {}
        required: list[tuple[int, str]] = []
        for position, p in enumerate(positional):
            if p.kind is kinds.POSITIONAL_OR_KEYWORD:
                slots[p.name] = position
            if p.default is p.empty:
                required.append((position, p.name))
        fewest = len(required)
        for p in parameters:
            if p.kind is kinds.KEYWORD_ONLY:
                slots[p.name] = sys.maxsize
                if p.default is p.empty:
                    required.append((sys.maxsize, p.name))
                    fewest = sys.maxsize
        varkw = any(p.kind is kinds.VAR_KEYWORD for p in parameters)
        shown = inspect.Signature([p.replace(annotation=p.empty) for p in parameters])
        return cls(
            signature=inspect.Signature(parameters),
            shown=str(shown),
            fewest=fewest,
            most=most,
            slots=None if varkw else types.MappingProxyType(slots),
            required=tuple(required),
        )

    def __call__(self, name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
        """Return if ``args`` and ``kwargs`` bind to the signature.

        Raises:
            TypeError: they do not; the message names ``name``, the parameters and
                what is wrong (``inspect.Signature.bind``'s words).
        """
        given = len(args)
        if not kwargs:
            if self.fewest <= given <= self.most:
                return
        elif self.slots is not None and given <= self.most:
            slots = self.slots
            if all(slots.get(key, -1) >= given for key in kwargs) and all(
                position < given or required in kwargs for position, required in self.required
            ):
                return
        try:
            self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(
                f"{name}{self.shown} cannot be called with these arguments: {exc}"
            ) from None
