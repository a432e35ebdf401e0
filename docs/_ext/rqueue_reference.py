"""The generated reference pages: settings, system checks, management commands and metrics.

Each page is Markdown written, when the build starts, from what the code declares: the
settings rows (:mod:`django_rqueue.conf.settings`, rendered by
:func:`django_rqueue.conf.table.markdown_table`), the check ids of those
rows and of every ``checks.Error``/``checks.Warning`` in the package (read from its source,
with their messages and hints), the argparse parser of every ``rqueue_*`` command, and the
metric families the Prometheus collector yields (:mod:`django_rqueue.ops.metrics`).
The pages are written to ``docs/reference/_generated/`` (not committed) and included by
the pages beside it, which say what they are.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import importlib
import re
import string
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.core.management import BaseCommand, find_commands, load_command_class
from sphinx.application import Sphinx

import django_rqueue
from django_rqueue.conf.settings import GENERAL_CHECKS, OPTIONS, QUEUE_OPTIONS, SETTINGS
from django_rqueue.conf.table import OPTIONS_INTRO, markdown_table

PACKAGE = Path(django_rqueue.__file__).parent
CHECK_ID = re.compile(r"rqueue\.[EW]\d{3}")
#: Characters that Markdown would read as markup in a text taken from the code.
_MARKUP = re.compile(r"([\\`*_\[\]<>|#])")


def escaped(text: str) -> str:
    """``text`` as literal Markdown (its markup characters backslash-escaped)."""
    return _MARKUP.sub(r"\\\1", text)


# ------------------------------------------------------------------------ settings --


def settings_page() -> str:
    """Both settings tables and the checks of the whole setting."""
    queue_only = {row.key for row in QUEUE_OPTIONS}
    general = ", ".join(f"[`{i}`](checks.md#{anchor(i)}) ({m})" for i, m in GENERAL_CHECKS.items())
    text = (
        "## Top-level keys\n\n"
        f"{markdown_table(SETTINGS)}\n"
        "## Job options\n\n"
        f"{OPTIONS_INTRO}\n\n"
        f"{markdown_table((*OPTIONS, *QUEUE_OPTIONS), only_queue=queue_only)}\n"
    )
    return text + f"Checks of the whole setting: {general}.\n"


# -------------------------------------------------------------------------- checks --


@dataclass
class Check:
    """What the code says of one check id."""

    id: str
    messages: list[str] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)
    modules: set[str] = field(default_factory=set)
    keys: list[str] = field(default_factory=list)

    @property
    def level(self) -> str:
        return "Error" if self.id.startswith("rqueue.E") else "Warning"


def anchor(check_id: str) -> str:
    """The anchor of ``check_id`` on the checks page: ``rqueue.E005`` -> ``rqueue-e005``."""
    return check_id.lower().replace(".", "-")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _value(node: ast.expr, namespace: dict[str, Any]) -> object:
    """The value of a constant, a name or a dotted name in ``namespace``; ``None`` if unknown."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return namespace.get(node.id)
    if isinstance(node, ast.Attribute):
        owner = _value(node.value, namespace)
        return getattr(owner, node.attr, None) if owner is not None else None
    return None


def _known(node: ast.expr, namespace: dict[str, Any]) -> str | None:
    """The text of an f-string's expression that reads only the module's own names
    (``{", ".join(sorted(BACKOFF_NAMES))}``, ``{defaults.MAX_PAYLOAD_BYTES}``), else ``None``
    (it reads the check's arguments, known only when it runs)."""
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    if not names or not names <= (namespace.keys() | vars(builtins).keys()):
        return None
    code = compile(ast.Expression(node), "<check>", "eval")
    try:  # the package's own constants and functions, as the check would compute them
        value = eval(code, dict(namespace))  # noqa: S307
    except Exception:  # a name that is not what it seemed: the expression as written
        return None
    return str(value) if isinstance(value, str | int | float) else None


def _text(node: ast.expr, namespace: dict[str, Any], *, template: bool) -> str | None:
    """Markdown of a message or hint: a string, an f-string or (``template``) a
    :meth:`str.format` template; what is known only at run time is shown as ``{name}``."""
    pieces: list[tuple[str, str | None]] = []  # (literal text, placeholder)

    def literal(text: str) -> None:
        if template:
            pieces.extend((t, name) for t, name, _, _ in string.Formatter().parse(text))
        else:
            pieces.append((text, None))

    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):  # "..." + (...)
        left, right = (_text(n, namespace, template=template) for n in (node.left, node.right))
        return None if left is None else left + (right if right is not None else "`{…}`")
    if isinstance(node, ast.JoinedStr):
        for part in node.values:
            if isinstance(part, ast.Constant):
                literal(str(part.value))
            elif isinstance(part, ast.FormattedValue):
                known = _known(part.value, namespace)
                if known is not None:
                    pieces.append((known, None))
                else:
                    pieces.append(("", ast.unparse(part.value)))
    else:
        value = _value(node, namespace)
        if not isinstance(value, str):
            return None
        literal(value)
    return "".join(escaped(text) + (f"`{{{name}}}`" if name else "") for text, name in pieces)


def _parameter_defaults(function: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, Any]:
    """The constant defaults of ``function``'s parameters (``check_id="rqueue.E002"``)."""
    args = function.args
    positional = [*args.posonlyargs, *args.args]
    defaulted = positional[len(positional) - len(args.defaults) :]
    pairs = [
        *zip(defaulted, args.defaults, strict=True),
        *zip(args.kwonlyargs, args.kw_defaults, strict=True),
    ]
    return {a.arg: d.value for a, d in pairs if isinstance(d, ast.Constant)}


def _calls_with_ids(tree: ast.AST, namespace: dict[str, Any]) -> Iterator[tuple[str, ast.Call]]:
    """Every call of ``tree`` given a check id (``id=...`` or a positional argument), a
    function's calls also with its parameters' defaults (``id=check_id``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            defaults = _parameter_defaults(node)
            if defaults:
                for inner in node.body:
                    yield from _calls_with_ids(inner, {**namespace, **defaults})
        if not isinstance(node, ast.Call):
            continue
        given = [kw.value for kw in node.keywords if kw.arg == "id"] + list(node.args)
        for arg in given:
            value = _value(arg, namespace)
            if isinstance(value, str) and CHECK_ID.fullmatch(value):
                yield value, node
                break


def _ids_in(tree: ast.AST) -> Iterator[str]:
    """Every string of ``tree`` that is a check id and nothing else."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if CHECK_ID.fullmatch(node.value):
                yield node.value


def collected_checks() -> dict[str, Check]:
    """Every check id of the package, with its messages, hints, modules and settings."""
    found: dict[str, Check] = {}

    def check(check_id: str) -> Check:
        return found.setdefault(check_id, Check(check_id))

    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module = _module_name(path)
        ids = set(_ids_in(tree))
        for check_id in ids:
            check(check_id)
        namespace: dict[str, Any] = {}
        if ids or any(isinstance(n, ast.keyword) and n.arg == "id" for n in ast.walk(tree)):
            try:
                namespace = vars(importlib.import_module(module))
            except ImportError:  # an optional dependency is missing: the text as written
                namespace = {}
        for check_id, call in _calls_with_ids(tree, namespace):
            entry = check(check_id)
            is_rule = isinstance(call.func, ast.Name) and call.func.id == "Rule"
            strings = [a for a in call.args if not CHECK_ID.fullmatch(str(_value(a, namespace)))]
            for arg in strings[:2] if is_rule else strings[:1]:
                message = _text(arg, namespace, template=is_rule)
                if message and message not in entry.messages:
                    entry.messages.append(message)
                    break
            for kw in call.keywords:
                if kw.arg == "hint" and kw.value is not None:
                    hint = _text(kw.value, namespace, template=False)
                    if hint and hint not in entry.hints:
                        entry.hints.append(hint)
            entry.modules.add(module)
    for rows, label in ((SETTINGS, ""), (OPTIONS, " (job option)"), (QUEUE_OPTIONS, " (queue)")):
        for row in rows:
            for check_id in row.checks:
                check(check_id).keys.append(f"`{row.key}`{label}")
    for check_id, meaning in GENERAL_CHECKS.items():
        check(check_id).keys.append(f"`RQUEUE` ({meaning})")
    return dict(sorted(found.items()))


def checks_page() -> str:
    """One section per check id: its level, messages, hints, settings and modules."""
    out: list[str] = []
    for entry in collected_checks().values():
        out.append(f"## {entry.id}\n\n{entry.level}.")
        if entry.keys:
            out.append("Settings: " + ", ".join(entry.keys) + ".")
        if entry.messages:
            out.append("Messages:\n\n" + "\n".join(f"- {m}" for m in entry.messages))
        if entry.hints:
            out.append("Hints:\n\n" + "\n".join(f"- {h}" for h in entry.hints))
        modules = ", ".join(f"`{m}`" for m in sorted(entry.modules))
        if modules:
            out.append(f"Raised in: {modules}.")
    return "\n\n".join(out) + "\n"


# ------------------------------------------------------------------------ commands --


def _option(action: argparse.Action) -> str:
    """The option as typed: ``--queues QUEUES``, ``--burst``, ``queue``."""
    if not action.option_strings:
        name = str(action.metavar or action.dest)
        return {"+": f"{name} ...", "*": f"[{name} ...]", "?": f"[{name}]"}.get(
            str(action.nargs), name
        )
    takes_value = action.nargs != 0
    metavar = action.metavar or action.dest.upper()
    return ", ".join(f"{flag} {metavar}" if takes_value else flag for flag in action.option_strings)


def _help(action: argparse.Action, parser: argparse.ArgumentParser) -> str:
    text = action.help or ""
    if "%" in text:  # argparse's own expansion (%(default)s, %(choices)s)
        text = text % {**vars(action), "prog": parser.prog}
    if action.choices is not None:
        text += " One of: " + ", ".join(str(c) for c in action.choices) + "."
    return escaped(" ".join(text.split()))


def _arguments(
    parser: argparse.ArgumentParser, title: str, skip: set[str], level: int = 2
) -> Iterator[str]:
    """The Markdown blocks of ``parser``: a table of its arguments but those in ``skip``, then
    a section (one heading level down) per subcommand."""
    rows = ["| argument | meaning |", "| --- | --- |"]
    subcommands: list[tuple[str, str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if action.dest in skip or action.help == argparse.SUPPRESS:
            continue
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                name = choice.dest
                subcommands.append((name, choice.help or "", action.choices[name]))
            continue
        rows.append(f"| `{_option(action)}` | {_help(action, parser)} |")
    if len(rows) > 2:
        yield "\n".join(rows)
    for name, text, sub in subcommands:
        yield f"{'#' * (level + 1)} {title} {name}\n\n{escaped(text)}"
        yield from _arguments(sub, f"{title} {name}", skip | {"help"}, level + 1)


def commands_page() -> str:
    """One section per ``rqueue_*`` command: its help and a table of its arguments (and a
    section per subcommand)."""
    common = BaseCommand().create_parser("manage.py", "command")
    common_dests = {a.dest for a in common._actions}
    common_flags = [a.option_strings[-1] for a in common._actions if a.dest != "help"]
    flags = ", ".join(f"`{f}`" for f in common_flags)
    out = [f"Every command also takes Django's own options: {flags}."]
    names = sorted(n for n in find_commands(str(PACKAGE / "management")) if n.startswith("rqueue"))
    for name in names:
        command = load_command_class("django_rqueue", name)
        parser = command.create_parser("manage.py", name)
        out.append(f"## {name}\n\n{escaped(' '.join(str(command.help).split()))}")
        out.extend(_arguments(parser, name, common_dests))
    return "\n\n".join(out) + "\n"


# ------------------------------------------------------------------------- metrics --

#: The queue and job names of the sample scrape the metrics page is read from.
_QUEUE, _JOB = "<queue>", "<job>"


def metric_families() -> list[Any]:
    """The metric families of a scrape of one queue holding one job's durations, as the
    collector yields them (``prometheus_client`` ``Metric`` objects); nothing reads Redis."""
    from django_rqueue.ops import metrics  # needs prometheus_client (the prometheus extra)
    from django_rqueue.ops.counts import QueueCounts

    sample = metrics.QueueSample(QueueCounts(_QUEUE), 0, {_JOB: metrics.Histogram()})
    return [
        *metrics.queue_metrics({_QUEUE: sample}),
        *metrics.worker_metrics([], [_QUEUE]),
    ]


def _exposed(family: Any) -> str:
    """The series name a scraper sees: a counter's ``_total``, a histogram's three."""
    if family.type == "counter":
        return f"`{family.name}_total`"
    if family.type == "histogram":
        return f"`{family.name}` (`_bucket`, `_sum`, `_count`)"
    return f"`{family.name}`"


def _labels(family: Any) -> str:
    """A family's labels, each label of a fixed set of values with its values."""
    values: dict[str, list[str]] = {}
    for sample in family.samples:
        for label, value in sample.labels.items():
            if label != "le" and value not in values.setdefault(label, []):
                values[label] = [*values[label], value]
    found = []
    for label, seen in values.items():
        fixed = [v for v in seen if v not in (_QUEUE, _JOB)]
        found.append(f"`{label}`" + (f" ({', '.join(fixed)})" if fixed else ""))
    return ", ".join(found) or "none"


def metrics_page() -> str:
    """A table of every metric (series, type, labels, help text), then the histogram's buckets."""
    families = metric_families()
    rows = ["| metric | type | labels | meaning |", "| --- | --- | --- | --- |"]
    for family in families:
        meaning = escaped(family.documentation)
        rows.append(f"| {_exposed(family)} | {family.type} | {_labels(family)} | {meaning} |")
    buckets = [
        s.labels["le"]
        for f in families
        if f.type == "histogram"
        for s in f.samples
        if s.name.endswith("_bucket")
    ]
    return (
        "\n".join(rows)
        + "\n\nThe buckets of the duration histogram (`le`, seconds): "
        + ", ".join(f"`{le}`" for le in buckets)
        + ".\n"
    )


# -------------------------------------------------------------------------- sphinx --

#: The generated pages: file name -> what writes it.
PAGES = {
    "settings.md": settings_page,
    "checks.md": checks_page,
    "commands.md": commands_page,
    "metrics.md": metrics_page,
}


def write_pages(app: Sphinx) -> None:
    """Write the pages into ``reference/_generated/`` (only those that changed, so Sphinx
    rebuilds only what depends on them)."""
    folder = Path(app.srcdir) / "reference" / "_generated"
    folder.mkdir(exist_ok=True)
    for name, page in PAGES.items():
        path, text = folder / name, page()
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("builder-inited", write_pages)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
