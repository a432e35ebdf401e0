"""References to other projects as code without a link, when the site is built without
their intersphinx inventories (offline, as in CI).

Sphinx's ``-n`` warns about every reference it cannot resolve; without the inventories
that would be every ``:class:`django.db.models.Model``` of the docstrings. This handler
resolves those (and only those: a reference into django-rqueue that does not resolve is
still a warning) to their text. With the inventories (``RQUEUE_DOCS_INTERSPHINX=1``) it
leaves Python, Django and redis-py to intersphinx, so a wrong reference to them is a
warning there; the other projects (:data:`EXTERNAL`) have no inventory in ``docs/conf.py``
and are always shown unlinked.
"""

from __future__ import annotations

import builtins
import sys
from typing import Any

from docutils import nodes
from sphinx.addnodes import pending_xref
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment

#: The top-level packages of the projects ``docs/conf.py`` has inventories of, by the
#: project's key in ``intersphinx_mapping``.
INVENTORIED = {"django": "django", "redis": "redis"}
#: Top-level packages documented elsewhere, with no inventory here.
EXTERNAL = frozenset(
    {
        "asgiref",
        "cryptography",
        "django_redis",
        "django_tasks",
        "httpcore",
        "httpx",
        "prometheus_client",
        "sentry_sdk",
    }
)


def inventory(target: str) -> str | None:
    """The ``intersphinx_mapping`` key that would resolve ``target`` (``"python"`` for
    ``"int"`` and ``"collections.abc.Mapping"``, ``"django"``, ``"redis"``), ``""`` for a
    package of :data:`EXTERNAL`, ``None`` for anything else (django-rqueue's own names)."""
    top = target.lstrip("~.").split(".", 1)[0]
    if top in sys.stdlib_module_names or hasattr(builtins, top):
        return "python"
    return INVENTORIED.get(top, "" if top in EXTERNAL else None)


def is_external(target: str) -> bool:
    """Whether ``target`` (``"django.db.models.Model"``, ``"int"``) is outside django-rqueue."""
    return inventory(target) is not None


def unlinked(
    app: Sphinx, env: BuildEnvironment, node: pending_xref, contnode: nodes.TextElement
) -> nodes.Node | None:
    """The ``missing-reference`` handler: ``contnode`` (the text) for a Python reference to
    another project whose inventory is not configured; ``None`` (not resolved) otherwise."""
    if node.get("refdomain") != "py":
        return None
    project = inventory(node["reftarget"])
    if project is None or project in app.config.intersphinx_mapping:
        return None
    return contnode


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("missing-reference", unlinked)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
