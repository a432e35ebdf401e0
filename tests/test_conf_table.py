"""The README's settings tables are the rows of django_rqueue.conf.settings (conf.table)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from django_rqueue.conf.settings import OPTIONS, Setting
from django_rqueue.conf.table import (
    BEGIN,
    END,
    main,
    markdown_table,
    rewritten,
    settings_block,
    shown_checks,
)
from tests.support.processes import REPO

README = REPO / "README.md"


def test_the_readme_holds_the_generated_tables() -> None:
    assert main(["--check", str(README)]) == 0


def test_the_check_runs_as_a_command_without_django_settings() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "django_rqueue.conf.table", "--check", str(README)],
        cwd=REPO,
        env={"PATH": "", "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_the_check_fails_on_a_changed_readme_and_a_rewrite_repairs_it(tmp_path, capsys) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(README.read_text().replace("| `LEASE` | `float` | `30` |", "| `LEASE` |"))
    assert main(["--check", str(readme)]) == 1
    assert "settings table differs" in capsys.readouterr().err
    assert main([str(readme)]) == 0
    assert readme.read_text() == README.read_text()


def test_a_readme_without_the_markers_is_refused() -> None:
    with pytest.raises(ValueError, match="no block between"):
        rewritten(f"# title\n{END}\n{BEGIN}\n")


def test_a_table_has_one_line_per_row_and_escapes_pipes() -> None:
    row = Setting("X", "int | None", None, "a | b", ("rqueue.E001",))
    line = markdown_table([row]).splitlines()[2]
    assert line == r"| `X` | `int \| None` | unset | a \| b | E001 |"
    assert len(markdown_table(OPTIONS).splitlines()) == 2 + len(OPTIONS)
    assert settings_block().startswith(BEGIN) and settings_block().endswith(END)


def test_check_ids_in_a_row_of_three_or_more_make_a_range() -> None:
    ids = ("rqueue.E070", "rqueue.E071", "rqueue.E072", "rqueue.E074", "rqueue.E075")
    assert shown_checks((*ids, "rqueue.W070")) == "E070–E072, E074, E075, W070"
    assert shown_checks(()) == ""
