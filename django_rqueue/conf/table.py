"""The settings tables as Markdown, generated from the rows of :mod:`.conf.settings`.

:func:`markdown_table` renders rows as one Markdown table; the documentation's settings
reference page is built from it, so a setting is described once, in its row. A row's doc
may link to a page of the documentation by its path from the site's root
(``[Rate limits](/howto/rate-limits.md)``).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping

from .settings import Setting

#: The sentence between the two tables.
OPTIONS_INTRO = (
    "The job options of a queue, in `DEFAULTS` (every queue) and in `QUEUES[name]` "
    "(that queue alone, over `DEFAULTS`):"
)


def shown_value(value: object) -> str:
    """``value`` as a settings file spells it: JSON-like, with Python's ``None``/``True``."""
    if value is None or isinstance(value, bool | int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, Mapping):
        return (
            "{" + ", ".join(f"{shown_value(k)}: {shown_value(v)}" for k, v in value.items()) + "}"
        )
    if isinstance(value, list | tuple):
        return "[" + ", ".join(shown_value(v) for v in value) + "]"
    return repr(value)


def shown_default(row: Setting) -> str:
    """The default cell of ``row``: its :attr:`~.Setting.shown_default`, ``unset`` for
    ``None``, else the value in code."""
    if row.shown_default is not None:
        return row.shown_default
    return "unset" if row.default is None else f"`{shown_value(row.default)}`"


def shown_checks(ids: Iterable[str]) -> str:
    """``("rqueue.E070", "rqueue.E071", "rqueue.E072", "rqueue.W070")`` -> ``E070–E072, W070``
    (three ids in a row or more make a range)."""
    runs: list[list[str]] = []
    for short in (i.removeprefix("rqueue.") for i in ids):
        last = runs[-1][-1] if runs else None
        if last and last[0] == short[0] and int(last[1:]) + 1 == int(short[1:]):
            runs[-1].append(short)
        else:
            runs.append([short])
    return ", ".join(f"{run[0]}–{run[-1]}" if len(run) > 2 else ", ".join(run) for run in runs)


def _cell(text: str) -> str:
    """``text`` inside a table cell: a ``|`` escaped (GitHub's tables read ``\\|`` as ``|``
    even inside code)."""
    return text.replace("|", "\\|")


def markdown_table(rows: Iterable[Setting], *, only_queue: Collection[str] = ()) -> str:
    """One Markdown table of ``rows``: key, type, default, meaning, system checks.

    ``only_queue``: keys a queue alone may set (marked so in the key cell).
    """
    lines = ["| key | type | default | meaning | checks |", "| --- | --- | --- | --- | --- |"]
    for row in rows:
        key = f"`{row.key}`" + (" (queue only)" if row.key in only_queue else "")
        cells = [key, f"`{row.type}`", shown_default(row), row.doc, shown_checks(row.checks)]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"
