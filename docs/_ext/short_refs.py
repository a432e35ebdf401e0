"""A reference to a django-rqueue object by its short name, or by the package that
re-exports it, wherever it is documented.

The docstrings name objects of other modules briefly (``:class:`RedisUnavailable``` in
:mod:`django_rqueue.job`), as a reader of the code would; Sphinx looks such a name up only
in the current module and class. When that fails, this handler looks it up as if it were
written ``:class:`.RedisUnavailable``` (any documented object of that name): one match
resolves it, none leaves the warning of ``-n``, several give Sphinx's "more than one target"
warning. A name the package re-exports (``:class:`django_rqueue.Job```) is looked up where
it is defined (``django_rqueue.job.Job``), where the API page documents it.
"""

from __future__ import annotations

import pkgutil
from typing import Any

from docutils import nodes
from sphinx.addnodes import pending_xref
from sphinx.application import Sphinx
from sphinx.domains.python import PythonDomain
from sphinx.environment import BuildEnvironment


def defined_at(target: str) -> str | None:
    """Where a re-exported object is defined: ``"django_rqueue.Job"`` ->
    ``"django_rqueue.job.Job"``; ``None`` if ``target`` is not a re-export of the package."""
    if not target.startswith("django_rqueue."):
        return None
    try:
        obj = pkgutil.resolve_name(target)
    except (ImportError, AttributeError, ValueError):
        return None
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    home = f"{module}.{qualname}" if module and qualname else None
    return home if home != target else None


def by_short_name(
    app: Sphinx, env: BuildEnvironment, node: pending_xref, contnode: nodes.TextElement
) -> nodes.Element | None:
    """The ``missing-reference`` handler: resolve a Python reference by its name alone."""
    if node.get("refdomain") != "py" or node.get("refspecific"):
        return None
    domain = env.domains["py"]
    assert isinstance(domain, PythonDomain)  # noqa: S101 - Sphinx's own domain
    target, specific = node["reftarget"], node.deepcopy()
    home = defined_at(target)
    if home is None:
        specific["refspecific"] = True
    return domain.resolve_xref(
        env, node["refdoc"], app.builder, node["reftype"], home or target, specific, contnode
    )


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("missing-reference", by_short_name)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
