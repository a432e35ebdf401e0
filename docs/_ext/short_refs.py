"""A reference to a django-rqueue object by its short name, or by the package that
re-exports it, wherever it is documented.

The docstrings name objects of other modules briefly (``:class:`RedisUnavailable``` in
:mod:`django_rqueue.job`), as a reader of the code would, and so do the annotations
autodoc shows (``options: JobOptions``). Sphinx looks such a name up in the current module
and class, then (for the types of an annotation, or a target written ``.Name``) as any
documented object of that name. Two steps add to that:

- Before Sphinx resolves a reference it cannot resolve to exactly one object, a name the
  current module imports (also under ``if TYPE_CHECKING:``; for a class documented under
  another ``__module__``, the module it is written in) is replaced by what it imports
  (:class:`ByImports`): ``JobOptions`` in :mod:`django_rqueue.enqueue` is
  ``django_rqueue.options.JobOptions``, never another documented ``JobOptions``; a name
  imported from another project (``MultiFernet``) is left, in full, to the handlers of
  other projects (intersphinx, :mod:`offline_refs`).
- When Sphinx still finds nothing (:func:`by_short_name`), a name the package re-exports
  (``:class:`django_rqueue.Job```) is looked up where it is defined
  (``django_rqueue.job.Job``), where the API page documents it, and any other name as if it
  were written ``:class:`.RedisUnavailable```: one match resolves it, none leaves the
  warning of ``-n``, several give Sphinx's "more than one target" warning.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import inspect
import pkgutil
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.addnodes import pending_xref
from sphinx.application import Sphinx
from sphinx.domains.python import PythonDomain
from sphinx.environment import BuildEnvironment
from sphinx.transforms.post_transforms import ReferencesResolver, SphinxPostTransform

PACKAGE = "django_rqueue"


def defined_at(target: str) -> str | None:
    """Where a re-exported object is defined: ``"django_rqueue.Job"`` ->
    ``"django_rqueue.job.Job"``; ``None`` if ``target`` is not a re-export of the package."""
    if not target.startswith(f"{PACKAGE}."):
        return None
    try:
        obj = pkgutil.resolve_name(target)
    except (ImportError, AttributeError, ValueError):
        return None
    if not (isinstance(obj, type) or inspect.isroutine(obj)):
        return None  # a constant, or a type alias (``tuple[str, int]`` says it is ``tuple``)
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    home = f"{module}.{qualname}" if module and qualname else None
    return home if home != target else None


@functools.cache
def imports(module: str) -> dict[str, str]:
    """The names that ``module``, one of the package's, imports outside its functions and
    classes (under ``if TYPE_CHECKING:`` too), each with the dotted path it imports:
    ``{"JobOptions": "django_rqueue.options.JobOptions", "redis": "redis", ...}``."""
    if module != PACKAGE and not module.startswith(f"{PACKAGE}."):
        return {}
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return {}
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    package = module if spec.submodule_search_locations is not None else module.rpartition(".")[0]
    found: dict[str, str] = {}
    statements: list[ast.stmt] = list(tree.body)
    while statements:
        statement = statements.pop(0)
        if isinstance(statement, ast.If | ast.Try):
            statements[:0] = [*statement.body, *statement.orelse]
        elif isinstance(statement, ast.Import):
            for alias in statement.names:
                top = alias.name.partition(".")[0]
                found[alias.asname or top] = alias.name if alias.asname else top
        elif isinstance(statement, ast.ImportFrom):
            origin = importlib.util.resolve_name(
                "." * statement.level + (statement.module or ""), package
            )
            for alias in statement.names:
                found[alias.asname or alias.name] = f"{origin}.{alias.name}"
    return found


def imported_as(module: str | None, target: str) -> str | None:
    """The full name of what ``target`` (``"JobOptions"``, ``"counts.QueueCounts"``) is in
    ``module``'s imports, or ``None`` when its first part is not a name the module imports."""
    if not module:
        return None
    first, dot, rest = target.partition(".")
    origin = imports(module).get(first)
    return None if origin is None else origin + dot + rest


def written_in(module: str | None, cls: str | None) -> str | None:
    """The module whose source defines class ``cls`` of ``module``, when it is another one:
    ``RQueueBackend`` is documented in :mod:`django_rqueue.backends` (its ``__module__``)
    but written in ``django_rqueue.tasks.backend``, whose imports its annotations name."""
    if not module or not cls:
        return None
    try:
        obj = pkgutil.resolve_name(f"{module}:{cls}")
    except (ImportError, AttributeError, ValueError):
        return None
    for member in vars(obj).values() if isinstance(obj, type) else ():
        function = getattr(member, "__func__", getattr(member, "fget", member))
        if not getattr(function, "__qualname__", "").startswith(f"{obj.__qualname__}."):
            continue  # not written in the class's body (``switch = staticmethod(...)``)
        source = getattr(function, "__globals__", {}).get("__name__")
        if isinstance(source, str):
            return source if source != module else None
    return None


class ByImports(SphinxPostTransform):
    """Qualify a Python reference by the current module's imports when Sphinx would not
    resolve it to exactly one object (see the module docstring)."""

    default_priority = ReferencesResolver.default_priority - 1

    def run(self, **kwargs: Any) -> None:
        domain = self.env.domains["py"]
        assert isinstance(domain, PythonDomain)  # noqa: S101 - Sphinx's own domain
        for node in self.document.findall(pending_xref):
            if node.get("refdomain") != "py":
                continue
            module, target = node.get("py:module"), node["reftarget"]
            full = imported_as(module, target) or imported_as(
                written_in(module, node.get("py:class")), target
            )
            if full is None or full == target:
                continue
            searchmode = 1 if node.hasattr("refspecific") else 0
            found = domain.find_obj(
                self.env, module, node.get("py:class"), target, node["reftype"], searchmode
            )
            if len(found) == 1:
                continue
            node["reftarget"] = defined_at(full) or full
            if node.hasattr("refspecific"):
                del node["refspecific"]


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
    app.add_post_transform(ByImports)
    app.connect("missing-reference", by_short_name)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
