"""An attribute's docstring as written, not read by napoleon.

Napoleon reads the first line of an attribute's (or a module constant's, or a property's)
docstring as ``type: description``, so ``#: Seconds: the upper bound of the delay``
would show ``Seconds`` as the type, and ``-n`` warn that no class ``Seconds`` exists. The
code writes types as annotations (autodoc shows those), never in the docstring, so
attribute docstrings are kept as they were before napoleon saw them; the docstrings of
functions and classes (``Args:``, ``Raises:``) still go through napoleon.

Nor is a constant whose value can be called (``sentinels``, a
:class:`~django_rqueue.conf.rules.Rule`) shown with the parameters and return type of
that call, as ``autodoc_typehints = "description"`` would show them: its type is its
annotation.
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


def no_call_signature(
    app: Sphinx, what: str, name: str, obj: Any, options: Any, *signature: Any
) -> None:
    """After autodoc recorded the call signature of ``obj`` for the description of its
    types: forget it when ``obj`` is a constant or an attribute, not a function."""
    if what not in {"data", "attribute"}:
        return
    recorded: dict[str, Any] | None = app.env.temp_data.get("annotations")
    if recorded is not None:
        recorded.pop(name, None)


def setup(app: Sphinx) -> dict[str, Any]:
    app.setup_extension("sphinx.ext.napoleon")
    app.connect("autodoc-process-docstring", keep, priority=BEFORE)
    app.connect("autodoc-process-docstring", restore, priority=AFTER)
    app.connect("autodoc-process-signature", no_call_signature, priority=AFTER)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
