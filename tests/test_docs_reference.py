"""The documentation site's reference (docs/_ext): settings, checks, commands, links, internals.

The site's build (scripts/docs.sh, in CI) checks that the pages render without a warning;
these tests check that they say everything the code declares.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from types import ModuleType

import pytest
from django.core.management import BaseCommand, load_command_class

from django_rqueue.conf.settings import GENERAL_CHECKS, OPTIONS, QUEUE_OPTIONS, SETTINGS
from tests.support.processes import REPO

INTERNALS = REPO / "docs" / "reference" / "internals"

COMMANDS = [
    "rqueue_failed",
    "rqueue_info",
    "rqueue_pause",
    "rqueue_poller",
    "rqueue_restart",
    "rqueue_resume",
    "rqueue_work",
]


def _extension(name: str) -> ModuleType:
    path = str(REPO / "docs" / "_ext")
    if path not in sys.path:
        sys.path.append(path)
    return importlib.import_module(name)


@pytest.fixture(scope="module")
def reference() -> ModuleType:
    return _extension("rqueue_reference")


def test_the_settings_page_has_every_key(reference) -> None:
    page = reference.settings_page()
    for row in (*SETTINGS, *OPTIONS, *QUEUE_OPTIONS):
        assert f"| `{row.key}`" in page
    # A row links to a documentation page by its path from the site's root (the build checks
    # that the page and its anchor exist).
    assert "[Rate limits](/howto/rate-limits.md)" in page


def test_every_check_id_has_a_message_and_its_settings(reference) -> None:
    found = reference.collected_checks()
    declared = {i for row in (*SETTINGS, *OPTIONS, *QUEUE_OPTIONS) for i in row.checks}
    assert declared | set(GENERAL_CHECKS) <= set(found)
    assert [i for i, check in found.items() if not check.messages] == []
    # An id given as a module constant, as a parameter's default, and a message that
    # computes a list from the module's constants.
    assert "rqueue.E013" in found and found["rqueue.E013"].modules
    assert found["rqueue.E002"].messages == ["`{where}` has an unknown key `{key}`."]
    assert "exponential" in found["rqueue.E006"].messages[0]
    assert "## rqueue.W010" in reference.checks_page()


def test_the_commands_page_has_every_command_and_argument(reference) -> None:
    page = reference.commands_page()
    common = {a.dest for a in BaseCommand().create_parser("manage.py", "x")._actions}
    for name in COMMANDS:
        assert f"\n## {name}\n" in page
        parser = load_command_class("django_rqueue", name).create_parser("manage.py", name)
        for action in parser._actions:
            if action.dest not in common and not isinstance(action, argparse._SubParsersAction):
                assert (action.option_strings or [str(action.metavar or action.dest)])[0] in page
    for sub in ("list", "show", "retry", "delete"):
        assert f"\n### rqueue_failed {sub}\n" in page
    assert "`--max-jobs MAX_JOBS`" in page and "`--settings`" in page


def test_markup_of_the_code_text_is_escaped(reference) -> None:
    assert reference.escaped("RQUEUE['QUEUES'] <queue> a|b *x*") == (
        r"RQUEUE\['QUEUES'\] \<queue\> a\|b \*x\*"
    )


def test_a_re_exported_name_is_looked_up_where_it_is_defined() -> None:
    defined_at = _extension("short_refs").defined_at
    assert defined_at("django_rqueue.Job") == "django_rqueue.job.Job"
    assert (
        defined_at("django_rqueue.RedisUnavailable") == "django_rqueue.exceptions.RedisUnavailable"
    )
    assert defined_at("django_rqueue.job.Job") is None
    assert defined_at("django_rqueue.NoSuchName") is None
    assert defined_at("django.db.models.Model") is None
    assert defined_at("django_rqueue.engine.replies.Enqueued") is None  # a type alias


def test_only_references_outside_the_package_may_be_left_unlinked() -> None:
    inventory = _extension("offline_refs").inventory
    assert inventory("int") == inventory("collections.abc.Mapping") == "python"
    assert inventory("django.db.models.Model") == "django"
    assert inventory("redis.asyncio.Redis") == "redis"
    assert inventory("httpx.Client") == ""  # no inventory: unlinked even online
    for target in ("django_rqueue.job.Job", "RedisUnavailable", ".model.Config"):
        assert inventory(target) is None


def test_a_short_name_is_qualified_by_what_its_module_imports() -> None:
    imported_as = _extension("short_refs").imported_as
    options = "django_rqueue.options.JobOptions"
    assert imported_as("django_rqueue.enqueue", "JobOptions") == options
    assert imported_as("django_rqueue.conf", "parse") == "django_rqueue.conf.parse.parse"
    assert (
        imported_as("django_rqueue.admin.overview", "counts.QueueCounts")
        == "django_rqueue.ops.counts.QueueCounts"
    )
    # Imported only for the type checker: a name of another project, in full.
    assert (
        imported_as("django_rqueue.encryption", "MultiFernet") == "cryptography.fernet.MultiFernet"
    )
    assert imported_as("django_rqueue.enqueue", "NoSuchName") is None
    assert imported_as(None, "JobOptions") is None
    assert imported_as("django.db", "models") is None  # only the package's own modules


def test_a_class_documented_under_another_module_is_read_where_it_is_written() -> None:
    written_in = _extension("short_refs").written_in
    # RQueueBackend's __module__ is the path settings name it at.
    assert written_in("django_rqueue.backends", "RQueueBackend") == "django_rqueue.tasks.backend"
    assert written_in("django_rqueue.job", "Job") is None
    # Its switch is a function of ops.operations, but the class is written in its module.
    assert written_in("django_rqueue.management.commands.rqueue_pause", "Command") is None
    assert written_in("django_rqueue.backends", None) is None


def _modules() -> set[str]:
    """Every module of the package but its migrations, by dotted name."""
    found = set()
    for path in (REPO / "django_rqueue").rglob("*.py"):
        parts = path.relative_to(REPO).with_suffix("").parts
        if "migrations" not in parts:
            found.add(".".join(parts).removesuffix(".__init__"))
    return found


def _internals_sections() -> dict[str, str]:
    """Each ``## `<module>``` section of the internals pages: module -> its text."""
    sections: dict[str, str] = {}
    for page in sorted(INTERNALS.glob("*.md")):
        for section in re.split(r"^## ", page.read_text(encoding="utf-8"), flags=re.M)[1:]:
            heading, _, body = section.partition("\n")
            assert heading.strip("`") not in sections, f"{heading} twice"
            sections[heading.strip("`")] = body
    return sections


def test_the_internals_pages_document_every_module_of_the_package() -> None:
    modules, sections = _modules(), _internals_sections()
    assert len(modules) > 100 and "django_rqueue.engine.keys" in modules
    # A new module needs a place on one of the pages; a page names no module that is gone.
    assert sorted(modules - sections.keys()) == []
    assert sorted(sections.keys() - modules) == []
    for module, body in sections.items():
        documented = re.findall(r"^\.\. automodule:: (\S+)$", body, flags=re.M)
        # Either autodoc over the module itself, or a link to the API page, which has it.
        assert documented == [module] or (not documented and f"{{py:mod}}`{module}`" in body)
    index = (REPO / "docs" / "reference" / "internals.md").read_text(encoding="utf-8")
    for page in INTERNALS.glob("*.md"):
        assert f"\ninternals/{page.stem}\n" in index


def test_the_metrics_page_has_every_metric_the_collector_yields(reference) -> None:
    pytest.importorskip("prometheus_client")
    page = reference.metrics_page()
    families = reference.metric_families()

    assert len(families) == 21
    for family in families:
        suffix = "_total" if family.type == "counter" else ""
        assert f"| `{family.name}{suffix}`" in page
        assert f"| {family.type} |" in page
    states = "`queue`, `state` (waiting, queued, scheduled, running, failed) |"
    assert f"| `rqueue_jobs` | gauge | {states}" in page
    ends = "`queue`, `state` (succeeded, failed, cancelled) |"
    assert f"| `rqueue_workflows_finished_total` | counter | {ends}" in page
    assert "| `rqueue_job_duration_seconds` (`_bucket`, `_sum`, `_count`) | histogram | " in page
    assert "`queue`, `job` |" in page and "| `rqueue_workers` | gauge | none |" in page
    assert "`0.005`, `0.01`," in page and "`3600.0`, `+Inf`." in page


def test_the_signals_page_documents_every_signal_from_its_doc_comment() -> None:
    from django.dispatch import Signal
    from sphinx.pycode import ModuleAnalyzer

    from django_rqueue import signals

    declared = {name for name, value in vars(signals).items() if isinstance(value, Signal)}
    page = (REPO / "docs" / "reference" / "signals.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\.\. autodata:: django_rqueue\.signals\.(\w+)$", page, re.M))
    comments = ModuleAnalyzer.for_module("django_rqueue.signals").find_attr_docs()

    assert documented == declared
    assert all(comments.get(("", name)) for name in declared), "a signal without a #: comment"
