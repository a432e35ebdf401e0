"""Run the documentation's examples: the rules a page's code blocks follow (Sybil).

``docs/conftest.py`` hands every ``docs/**/*.md`` page to :func:`sybil` (with the
fixtures :func:`docs_page`, :func:`docs_database` and :func:`docs_redis_server`), so
``pytest docs/`` runs each page's blocks in order, one namespace per page:

- ```` ```python ````: executed with Django set up (the test settings), the test
  database usable and ``RQUEUE["REDIS_URL"]`` pointing at a private
  redis-server, emptied when the page starts. A block starting ``>>>`` is a
  doctest.
- a Python block whose first line is ``# settings.py``: a settings fragment.
  Each UPPERCASE name it defines becomes a Django setting until the page ends
  (``override_settings``), with ``redis://localhost:6379`` URLs pointed at the
  private server and ``RQUEUE["REDIS_URL"]`` added when the fragment leaves it
  out; a list or tuple holding ``...`` (``INSTALLED_APPS = [..., "django_rqueue"]``)
  is checked (every other item must be an installed app), not applied. Then
  Django's system checks run: an error fails the block.
- a Python block whose first line is ``# <app>/<module>.py``: the module
  ``<app>.<module>``, executed as a fresh module (its packages created) that
  stays in ``sys.modules`` until the page ends; its public names are also put
  into the page's namespace, and the ``@job`` functions it defines are
  registered, so a worker can run them.
- ```` ```console ````: each ``$ python manage.py <command> <args>`` line
  (``django-admin``, ``python -m django`` too) is parsed by that command's own
  argument parser, so an option that does not exist fails; the extras of
  ``$ pip install "django-rqueue[a,b]..."`` must be declared in pyproject.toml.
  Other lines are shown, not run.
- ```` ```toml ```` and ```` ```json ````: parsed.
- on Django 5.2, ``django.tasks`` is the ``django_tasks`` backport (the pages tell 5.2
  readers to import it in its place).
- ``% skip: next "why"`` (a MyST comment) skips the next block;
  ``% invisible-code-block: python`` runs code the reader does not see, where
  :func:`work` runs queued jobs.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import shlex
import sys
import tomllib
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.conf import settings
from django.core import checks
from django.core.management import get_commands, load_command_class
from django.test.utils import override_settings, setup_databases, teardown_databases
from pytest_django import DjangoDbBlocker
from sybil import Document, Example, Region, Sybil
from sybil.evaluators.python import pad
from sybil.parsers.abstract import AbstractCodeBlockParser
from sybil.parsers.markdown.lexers import FencedCodeBlockLexer
from sybil.parsers.myst import PythonCodeBlockParser, SkipParser
from sybil.parsers.myst.lexers import DirectiveInPercentCommentLexer
from sybil.typing import Evaluator

from django_rqueue.engine.connection import reset_clients
from django_rqueue.worker.loop import Worker

from .inprocess import run_to_end
from .processes import REPO
from .redis_server import RedisServer

#: The first line of a settings fragment.
SETTINGS_LINE = "# settings.py"
#: The first line of a module block: ``# <app>/<module>.py``.
MODULE_LINE = re.compile(r"# ((?:\w+/)+\w+)\.py")
#: The Redis URLs pages use, pointed at the private server.
LOCAL_REDIS = re.compile(r"redis://(?:localhost|127\.0\.0\.1):6379(?:/(\d+))?")
#: How a page runs its commands: ``python manage.py <command>`` and the like.
COMMAND_PREFIXES = (
    ("python", "manage.py"),
    ("python3", "manage.py"),
    ("./manage.py",),
    ("python", "-m", "django"),
    ("django-admin",),
)
#: The package name the extras of ``pip install`` lines are checked for.
PACKAGE = "django-rqueue"


class Page:
    """What a page changed, undone when it ends: settings overridden, modules added."""

    def __init__(self, redis_url: str) -> None:
        self.redis_url = redis_url
        self._overrides: list[override_settings] = []
        self._modules: list[str] = []

    def override(self, **values: Any) -> None:
        """Make ``values`` Django settings until the page ends."""
        change = override_settings(**values)
        change.enable()
        self._overrides.append(change)

    def alias_tasks_backport(self) -> None:
        """On Django 5.2, make ``django.tasks`` the ``django_tasks`` backport for the page, as
        the pages tell 5.2 readers to import it (nothing when Django has ``django.tasks``)."""
        if importlib.util.find_spec("django.tasks") is not None:
            return
        try:
            backport = importlib.import_module("django_tasks")
        except ImportError:
            return  # without the tasks extra: the pages that need it fail, naming the module
        sys.modules["django.tasks"] = backport
        self._modules.append("django.tasks")

    def undo_last(self) -> None:
        """Undo the latest :meth:`override`."""
        self._overrides.pop().disable()

    def add_module(self, name: str, module: types.ModuleType) -> None:
        """Put ``module`` (and packages for its parents) into ``sys.modules`` for the page."""
        parts = name.split(".")
        for n in range(1, len(parts)):
            package = ".".join(parts[:n])
            if package not in sys.modules:
                parent = types.ModuleType(package)
                parent.__path__ = []
                sys.modules[package] = parent
                self._modules.append(package)
        sys.modules[name] = module
        self._modules.append(name)
        if len(parts) > 1:
            setattr(sys.modules[".".join(parts[:-1])], parts[-1], module)

    def close(self) -> None:
        """Undo the page's settings and modules, newest first."""
        while self._overrides:
            self._overrides.pop().disable()
        while self._modules:
            sys.modules.pop(self._modules.pop(), None)

    def local(self, value: Any) -> Any:
        """``value`` with each ``redis://localhost:6379[/db]`` pointed at the private server."""
        if isinstance(value, str):
            return LOCAL_REDIS.sub(self._server_url, value)
        if isinstance(value, dict):
            return {k: self.local(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self.local(v) for v in value)
        return value

    def _server_url(self, match: re.Match[str]) -> str:
        base = self.redis_url.rsplit("/", 1)[0]
        return f"{base}/{match.group(1) or 0}"


def page_of(namespace: dict[str, Any]) -> Page:
    page = namespace["docs_page"]
    assert isinstance(page, Page)
    return page


def run_python(example: Example) -> None:
    """Evaluate a Python block by its first line: settings fragment, module, or plain code."""
    source = str(example.parsed)
    first = source.split("\n", 1)[0].strip()
    code = compile(pad(source, example.line + example.parsed.line_offset), example.path, "exec")
    if first == SETTINGS_LINE:
        apply_settings(example, code)
    elif match := MODULE_LINE.fullmatch(first):
        add_module(example, match.group(1).replace("/", "."), code)
    else:
        exec(code, example.namespace)  # noqa: S102 - the page's own example
        example.namespace.pop("__builtins__", None)


def apply_settings(example: Example, code: types.CodeType) -> None:
    page = page_of(example.namespace)
    values: dict[str, Any] = {"__name__": "settings"}
    exec(code, values)  # noqa: S102 - the page's own example
    changes: dict[str, Any] = {}
    for name, value in values.items():
        if not name.isupper():
            continue
        if isinstance(value, list | tuple) and ... in value:
            missing = [a for a in value if a is not ... and not apps.is_installed(a)]
            assert not missing, f"{name} names apps that are not installed: {missing}"
            continue
        value = page.local(value)
        if name == "RQUEUE" and isinstance(value, dict):
            value.setdefault("REDIS_URL", page.redis_url)
        changes[name] = value
    page.override(**changes)
    errors = [m for m in checks.run_checks() if m.level >= checks.ERROR]
    if errors:
        page.undo_last()  # the rest of the page runs with the settings before
        raise AssertionError("\n".join(str(m) for m in errors))


def add_module(example: Example, name: str, code: types.CodeType) -> None:
    page = page_of(example.namespace)
    module = types.ModuleType(name)
    module.__file__ = example.path
    page.add_module(name, module)
    exec(code, module.__dict__)  # noqa: S102 - the page's own example
    for key, value in module.__dict__.items():
        if not key.startswith("_"):
            example.namespace[key] = value


def check_console(example: Example) -> None:
    """Parse each command line of a ``console`` block with the command's own parser."""
    for line in command_lines(str(example.parsed)):
        words = shlex.split(line)
        while words and re.fullmatch(r"\w+=\S*", words[0]):
            words.pop(0)  # VAR=value before the command
        check_command(words)


def command_lines(text: str) -> Iterator[str]:
    """The ``$ `` lines of a console block, continuation lines (``\\``) joined."""
    pending = ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if pending:
            pending += " " + line.rstrip("\\").strip()
        elif line.startswith("$ "):
            pending = line[2:].rstrip("\\").strip()
        else:
            continue
        if not line.endswith("\\"):
            yield pending
            pending = ""
    if pending:
        yield pending


def check_command(words: list[str]) -> None:
    for prefix in COMMAND_PREFIXES:
        if tuple(words[: len(prefix)]) == prefix and len(words) > len(prefix):
            name, args = words[len(prefix)], words[len(prefix) + 1 :]
            commands = get_commands()
            assert name in commands, f"no management command {name!r}"
            command = load_command_class(commands[name], name)
            command.create_parser("manage.py", name).parse_args(args)  # CommandError if wrong
            return
    if words[:2] in (["pip", "install"], ["python", "-m"]) and "install" in words:
        check_extras(words)


def check_extras(words: list[str]) -> None:
    declared = set(declared_extras())
    for word in words:
        match = re.match(rf"{PACKAGE}\[([\w,\s-]+)\]", word)
        if match:
            extras = {e.strip() for e in match.group(1).split(",")}
            assert extras <= declared, f"extras {sorted(extras - declared)} are not declared"


def declared_extras() -> list[str]:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return list(pyproject["project"]["optional-dependencies"])


def parse_toml(example: Example) -> None:
    tomllib.loads(str(example.parsed))


def parse_json(example: Example) -> None:
    json.loads(str(example.parsed))


class CodeBlockParser(AbstractCodeBlockParser):
    """Fenced blocks in ``language`` and ``% invisible-code-block: <language>`` comments.

    Sybil's own MyST parser also reads HTML comments as directives, which mistakes
    a page's ``<!-- code-map:start -->`` marker for an unfinished code block.
    """

    def __init__(self, language: str, evaluator: Evaluator) -> None:
        super().__init__(
            [
                FencedCodeBlockLexer(
                    language=r".+", mapping={"language": "arguments", "source": "source"}
                ),
                DirectiveInPercentCommentLexer(
                    directive=r"(invisible-)?code(-block)?", arguments=".+"
                ),
            ],
            language,
            evaluator,
        )


class PagePythonParser(PythonCodeBlockParser):
    """Python blocks (doctests as Sybil runs them) evaluated by :func:`run_python`."""

    def __init__(self) -> None:
        super().__init__()
        self.codeblock_parser = CodeBlockParser("python", run_python)

    def __call__(self, document: Document) -> Iterator[Region]:
        yield from super().__call__(document)


def work(*queues: str, limit: float = 30.0) -> Worker:
    """Run the jobs queued on ``queues`` (default: ``default``) here, with a burst worker."""
    worker = Worker(list(queues or ("default",)), burst=True, with_poller=False)
    run_to_end(worker, limit)
    return worker


def sybil(docs: Path) -> Sybil:
    """The Sybil that runs the pages under ``docs`` (every ``*.md`` but the build's)."""
    return Sybil(
        parsers=[
            SkipParser(),
            PagePythonParser(),
            CodeBlockParser("console", check_console),
            CodeBlockParser("toml", parse_toml),
            CodeBlockParser("json", parse_json),
        ],
        path=str(docs),
        patterns=["*.md"],
        excludes=["_build/*", "reference/_generated/*"],
        fixtures=["docs_page"],
        setup=lambda namespace: namespace.update(work=work),
    )


@pytest.fixture(scope="session")
def docs_redis_server() -> Iterator[RedisServer]:
    """A private redis-server for the pages of this session."""
    server = RedisServer().start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def docs_database(
    django_test_environment: None, django_db_blocker: DjangoDbBlocker
) -> Iterator[None]:
    """A test database for the pages (never the settings' own database file), in Django's
    test environment (``django_test_environment``: the in-memory mail outbox and the like).

    pytest-django creates one only for tests that ask for the ``db`` fixture or the
    ``django_db`` mark, and a page, whose blocks share their rows, uses neither. If
    pytest-django has made one already, this makes it again (empty, migrated), which is
    harmless: each undoes its own change of the settings at the session's end.
    """
    with django_db_blocker.unblock():
        created = setup_databases(verbosity=0, interactive=False)
    try:
        yield
    finally:
        with django_db_blocker.unblock():
            teardown_databases(created, verbosity=0)


@pytest.fixture(scope="module")
def docs_page(
    docs_redis_server: RedisServer,
    docs_database: None,
    django_db_blocker: DjangoDbBlocker,
) -> Iterator[Page]:
    """One page's run: its Redis emptied and ``RQUEUE`` pointed at it, the test database
    usable, and what the page's blocks change undone at its end."""
    if not docs_redis_server.ping():
        docs_redis_server.restart()
    with docs_redis_server.client() as client:
        client.flushall()
    page = Page(docs_redis_server.url)
    page.alias_tasks_backport()
    # A new project's settings where pages rely on them: Django's default task backend
    # (the test settings' backends name queues a page's RQUEUE may not declare).
    page.override(
        RQUEUE={**settings.RQUEUE, "REDIS_URL": docs_redis_server.url},
        TASKS={"default": {"BACKEND": "django_rqueue.tasks_api.ImmediateBackend"}},
    )
    reset_clients()
    try:
        with django_db_blocker.unblock():
            yield page
    finally:
        page.close()
        reset_clients()
