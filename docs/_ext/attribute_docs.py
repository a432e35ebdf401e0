"""An attribute's docstring as written, not read by napoleon.

Napoleon reads the first line of an attribute's (or a module constant's, or a property's)
docstring as ``type: description``, so ``#: Seconds: the upper bound of the delay``
would show ``Seconds`` as the type, and ``-n`` warn that no class ``Seconds`` exists. The
code writes types as annotations (autodoc shows those), never in the docstring, so
attribute docstrings are kept as they were before napoleon saw them; the docstrings of
functions and classes (``Args:``, ``Raises:``) still go through napoleon.
"""

from __future__ import annotations

from typing import Any

from sphinx.application import Sphinx

#: The kinds of object napoleon reads a type from the docstring of.
ATTRIBUTES = frozenset({"attribute", "data", "property"})

#: Napoleon's handler runs at the default priority, 500: one before it, one after.
BEFORE, AFTER = 400, 600

_kept: dict[int, list[str]] = {}


def keep(app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    """Before napoleon: remember an attribute docstring's lines."""
    if what in ATTRIBUTES:
        _kept[id(lines)] = list(lines)


def restore(app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    """After napoleon: put back what :func:`keep` remembered."""
    kept = _kept.pop(id(lines), None)
    if kept is not None:
        lines[:] = kept


def setup(app: Sphinx) -> dict[str, Any]:
    app.setup_extension("sphinx.ext.napoleon")
    app.connect("autodoc-process-docstring", keep, priority=BEFORE)
    app.connect("autodoc-process-docstring", restore, priority=AFTER)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
