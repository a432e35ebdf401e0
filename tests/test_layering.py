"""The package's import graph has no cycle, counting every import, and its layers point one way.

Module-level, function-local and ``if TYPE_CHECKING:`` imports are all edges:
a cycle held together by a local or type-only import is still two modules that
each need the other. The graph is built from the source (an AST walk, nothing
imported) and its cycles are found with :mod:`graphlib`.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import django_rqueue

PACKAGE = "django_rqueue"
ROOT = Path(django_rqueue.__file__).parent


def module_name(path: Path) -> str:
    """``django_rqueue/worker/loop.py`` -> ``"django_rqueue.worker.loop"`` (a package: its name)."""
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    """Every module of the package (migrations left out: Django imports them by path)."""
    return {
        module_name(path): path
        for path in sorted(ROOT.rglob("*.py"))
        if "migrations" not in path.relative_to(ROOT).parts
    }


def imported(module: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that ``module`` imports, anywhere in its source.

    ``from . import x`` counts ``x`` when it is a module, else its package;
    ``from .a import b`` counts ``.a.b`` when that is a module, else ``.a``.
    """
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            targets = [f"{source}.{alias.name}" for alias in node.names]
            targets = [t if t in known else source for t in targets]
        else:
            continue
        for target in targets:
            while target and target not in known:  # import a.b.c where only a.b is a module
                target = target.rpartition(".")[0]
            if target and target != module:
                found.add(target)
    return found


def graph() -> dict[str, set[str]]:
    """Each module -> the package modules it imports (its parent packages' ``__init__`` left
    out: importing ``a.b`` runs ``a/__init__``, but a package re-exporting its own modules is
    not a layering problem)."""
    known = modules()
    names = set(known)
    edges: dict[str, set[str]] = {}
    for module, path in known.items():
        edges[module] = {
            target
            for target in imported(module, path, names)
            if not module.startswith(f"{target}.")
        }
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module, each sorted.

    ``graphlib`` reports one cycle at a time; each found cycle's modules are merged
    into one node and the sort is retried until the graph is acyclic.
    """
    edges = {node: set(targets) for node, targets in edges.items()}
    groups: dict[str, set[str]] = {node: {node} for node in edges}
    while True:
        try:
            graphlib.TopologicalSorter(edges).prepare()
        except graphlib.CycleError as error:
            found: list[str] = error.args[1]
        else:
            break
        merged, *rest = dict.fromkeys(found)
        for node in rest:
            groups[merged] |= groups.pop(node)
            for target in edges.pop(node):
                edges[merged].add(target)
        for targets in edges.values():
            if targets & set(rest):
                targets -= set(rest)
                targets.add(merged)
        edges[merged].discard(merged)
    return sorted(sorted(group) for group in groups.values() if len(group) > 1)


def test_cycles_are_the_strongly_connected_components() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": {"d"}, "f": set()}
    assert cycles(edges) == [["a", "b", "c"], ["d", "e"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_every_import_is_an_edge() -> None:
    edges = graph()
    assert "django_rqueue.job" in edges["django_rqueue.registry"]  # under TYPE_CHECKING
    assert "django_rqueue.tasks.backend" in edges["django_rqueue.apps"]  # in a function
    assert "django_rqueue.exceptions" in edges["django_rqueue.registry"]  # at the top
    assert "django_rqueue.engine.keys" in edges["django_rqueue.enqueue.plan"]  # from a subpackage


def test_no_import_cycle() -> None:
    found = cycles(graph())
    assert found == [], f"import cycles: {found}"


def test_the_worker_does_not_import_the_master() -> None:
    """``master/`` (the prefork supervisor) depends on ``worker/``, never the reverse."""
    upward = sorted(
        f"{module} -> {target}"
        for module, targets in graph().items()
        if module.startswith(f"{PACKAGE}.worker")
        for target in targets
        if target.startswith(f"{PACKAGE}.master")
    )
    assert upward == [], f"worker/ imports master/: {upward}"


def test_ops_never_imports_the_worker_or_the_master() -> None:
    """The read and staff side (``ops/``) sits on the engine and ``conf``: the admin and the
    commands use it without pulling in the processes that run jobs."""
    edges = graph()
    found = {
        (module, target)
        for module, targets in edges.items()
        if module.startswith(f"{PACKAGE}.ops")
        for target in targets
        if target.startswith((f"{PACKAGE}.worker", f"{PACKAGE}.master"))
    }
    assert any(module.startswith(f"{PACKAGE}.ops.") for module in edges)
    assert found == set(), f"ops/ imports the worker or the master: {sorted(found)}"


def test_workflows_never_import_the_processes_or_the_staff_side() -> None:
    """``workflows/`` composes and reads jobs on the engine, as ``.delay()`` does: a view that
    starts a workflow pulls in neither the worker, the master, ``ops/`` nor the admin."""
    edges = graph()
    found = {
        (module, target)
        for module, targets in edges.items()
        if module.startswith(f"{PACKAGE}.workflows")
        for target in targets
        if target.startswith(tuple(f"{PACKAGE}.{p}" for p in ("worker", "master", "ops", "admin")))
    }
    assert any(module.startswith(f"{PACKAGE}.workflows.") for module in edges)
    assert found == set(), f"workflows/ imports the processes or the staff side: {sorted(found)}"
