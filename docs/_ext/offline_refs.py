"""References to Python, Django and redis-py as code without a link, when the site is built
without their intersphinx inventories (offline, as in CI).

Sphinx's ``-n`` warns about every reference it cannot resolve; without the inventories
that would be every ``:class:`django.db.models.Model``` of the docstrings. This handler
resolves those (and only those: a reference into django-rqueue that does not resolve is
still a warning) to their text. With the inventories (``RQUEUE_DOCS_INTERSPHINX=1``) it
does nothing, so a wrong external reference is a warning there.
"""

from __future__ import annotations

import builtins
import sys
from typing import Any

from docutils import nodes
from sphinx.addnodes import pending_xref
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment

#: Top-level packages documented elsewhere, beside the standard library.
EXTERNAL = frozenset({"django", "redis", "asgiref", "django_tasks", "cryptography", "httpx"})


def is_external(target: str) -> bool:
    """Whether ``target`` (``"django.db.models.Model"``, ``"int"``) is outside django-rqueue."""
    top = target.lstrip("~.").split(".", 1)[0]
    return top in EXTERNAL or top in sys.stdlib_module_names or hasattr(builtins, top)


def unlinked(
    app: Sphinx, env: BuildEnvironment, node: pending_xref, contnode: nodes.TextElement
) -> nodes.Node | None:
    """The ``missing-reference`` handler: ``contnode`` (the text) for an external Python
    reference while no inventory is configured; ``None`` (not resolved) otherwise."""
    if app.config.intersphinx_mapping or node.get("refdomain") != "py":
        return None
    return contnode if is_external(node["reftarget"]) else None


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("missing-reference", unlinked)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
