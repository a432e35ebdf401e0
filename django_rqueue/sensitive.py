"""``@job(sensitive=("password", ...))``: arguments hidden wherever people see a job.

The job function still receives the real values, and so do signal receivers and
``get_job()`` callers (code, not people: a receiver that re-enqueues or audits a
job needs them). What people read shows :data:`MASK` instead: the admin's job
page, ``manage.py rqueue_failed show`` and ``list --json``. The worker's log
lines never carry arguments at all.

Which arguments are hidden is written into the job's record when it is enqueued
(its ``JobFields.SENSITIVE`` field), so that a process that
never imported the job's module (the web server showing the admin) still hides
them; the job function's own declaration, when registered there, is applied on
top (it covers jobs enqueued before the declaration was added). An argument
named by ``sensitive`` is hidden whether it was passed by keyword or by position.

This hides values from people, not from Redis: whoever reads Redis reads the
arguments unless ``RQUEUE["ENCRYPTION_KEYS"]`` encrypts them
(``django_rqueue.encryption``). When an attempt fails, the hidden values (each
string of at least :data:`SHORTEST_SCRUBBED` characters in them) are replaced by
:data:`MASK` in the exception's message and traceback before they are stored or
logged (:func:`scrub`); signal receivers get the exception object as raised.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

#: What people see in place of a hidden argument's value.
MASK = "********"


@dataclasses.dataclass(frozen=True)
class Sensitive:
    """The arguments of one job function that are hidden from people.

    ``names``: parameters hidden when passed by keyword; ``positions``: indexes
    in the job's stored positional arguments (:attr:`Job.args
    <django_rqueue.job.Job.args>`, the context of a ``takes_context`` job not
    counted) hidden when passed by position. ``everything``: hide every
    argument (a record whose list of hidden arguments cannot be read).
    """

    names: frozenset[str] = frozenset()
    positions: frozenset[int] = frozenset()
    everything: bool = False

    @classmethod
    def of(cls, func: Callable[..., object], names: object, *, skip: int = 0) -> Sensitive | None:
        """The declaration ``@job(sensitive=names)`` makes for ``func``; ``None`` for none.

        ``skip``: leading parameters of ``func`` the caller does not pass (1 for the
        context of a ``takes_context`` job).

        Raises:
            TypeError: ``names`` is a string (write ``("password",)``) or not an
                iterable of strings.
            ValueError: a name is not a parameter of ``func`` that can carry a value
                (a ``*args``/``**kwargs`` parameter, the context, or no such
                parameter while ``func`` takes no ``**kwargs``); the message names
                each such name.
        """
        if isinstance(names, str | bytes) or not isinstance(names, Iterable):
            raise TypeError(
                f"sensitive must be a list or tuple of argument names, such as ('password',); "
                f"got {names!r}"
            )
        wanted = list(names)
        if not all(isinstance(name, str) for name in wanted):
            raise TypeError(f"sensitive must hold argument names (str), got {wanted!r}")
        if not wanted:
            return None
        try:
            parameters = list(inspect.signature(func).parameters.values())
        except (TypeError, ValueError):  # no readable signature: keyword arguments only
            return cls(names=frozenset(wanted))
        kinds = inspect.Parameter
        passed = parameters[skip:]
        positional = [
            p.name for p in passed if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)
        ]
        valued = {p.name for p in passed if p.kind not in (kinds.VAR_POSITIONAL, kinds.VAR_KEYWORD)}
        takes_any_keyword = any(p.kind is kinds.VAR_KEYWORD for p in passed)
        declared = {p.name for p in parameters}
        bad = [
            name
            for name in wanted
            if name not in valued and (name in declared or not takes_any_keyword)
        ]
        if bad:
            raise ValueError(
                f"sensitive names {', '.join(map(repr, bad))}, which "
                f"{'is not a parameter' if len(bad) == 1 else 'are not parameters'} of "
                f"{func.__qualname__}{_shown(passed)} (name the parameters whose values "
                "must be hidden)"
            )
        return cls(
            names=frozenset(wanted),
            positions=frozenset(i for i, name in enumerate(positional) if name in wanted),
        )

    def field(self) -> str:
        """This declaration as the job record stores it: JSON ``{"k": [names], "a": [indexes]}``."""
        return json.dumps(
            {"k": sorted(self.names), "a": sorted(self.positions)}, separators=(",", ":")
        )

    @classmethod
    def parse(cls, raw: bytes | str) -> Sensitive:
        """Read :meth:`field`'s JSON; anything else hides every argument (never raises)."""
        try:
            value = json.loads(raw)
            names, positions = value["k"], value["a"]
            if isinstance(names, list) and isinstance(positions, list):
                if all(isinstance(n, str) for n in names) and all(
                    type(i) is int and 0 <= i for i in positions
                ):
                    return cls(names=frozenset(names), positions=frozenset(positions))
        except (ValueError, TypeError, KeyError, RecursionError):
            pass
        return cls(everything=True)

    def __or__(self, other: Sensitive) -> Sensitive:
        return Sensitive(
            self.names | other.names,
            self.positions | other.positions,
            self.everything or other.everything,
        )

    def values(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> list[str]:
        """The texts of the hidden values among ``args`` and ``kwargs`` that :func:`scrub`
        looks for: every string of at least :data:`SHORTEST_SCRUBBED` characters in them
        (in lists and dicts too), longest first."""
        chosen = [
            *(v for i, v in enumerate(args) if self.everything or i in self.positions),
            *(v for k, v in kwargs.items() if self.everything or k in self.names),
        ]
        found: set[str] = set()
        _strings(chosen, found, depth=0)
        return sorted(found, key=len, reverse=True)

    def mask(
        self, args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> tuple[list[Any], dict[str, Any]]:
        """Copies of ``args`` and ``kwargs`` with the hidden values replaced by :data:`MASK`."""
        if self.everything:
            return [MASK] * len(args), dict.fromkeys(kwargs, MASK)
        return (
            [MASK if i in self.positions else value for i, value in enumerate(args)],
            {k: MASK if k in self.names else v for k, v in kwargs.items()},
        )


#: Hidden strings shorter than this are not looked for in error messages and tracebacks
#: (:func:`scrub`): a value of one or two characters would turn up everywhere.
SHORTEST_SCRUBBED = 4
#: How deep :meth:`Sensitive.values` looks into lists and dicts.
_DEPTH = 20


def _strings(value: object, found: set[str], depth: int) -> None:
    if isinstance(value, str):
        if len(value) >= SHORTEST_SCRUBBED:
            found.add(value)
    elif depth < _DEPTH and isinstance(value, list | tuple):
        for item in value:
            _strings(item, found, depth + 1)
    elif depth < _DEPTH and isinstance(value, dict):
        for item in value.values():
            _strings(item, found, depth + 1)


def scrub(text: str, values: Sequence[str]) -> str:
    """``text`` with every occurrence of each of ``values`` replaced by :data:`MASK`.

    An exception message or traceback that quotes a sensitive argument (``raise
    LoginFailed(f"bad password {password}")``) is stored and logged this way.
    """
    for value in values:
        if value in text:
            text = text.replace(value, MASK)
    return text


def _shown(parameters: Sequence[inspect.Parameter]) -> str:
    return str(inspect.Signature([p.replace(annotation=p.empty) for p in parameters]))
