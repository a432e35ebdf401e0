"""Aligned plain-text tables for the management commands."""

from __future__ import annotations

import datetime
from collections.abc import Sequence


def cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return str(value).replace("\n", " ")


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned columns separated by two spaces, one header line."""
    text = [[cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[n]) for r in text)) for n, h in enumerate(headers)]
    lines = [
        "  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip()
        for line in [list(headers), *text]
    ]
    return "\n".join(lines)
