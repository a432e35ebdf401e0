"""The code map of docs/explanation/layout.md is generated from the docstrings and kept current."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "code_map.py"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60
    )


def test_the_code_map_in_the_layout_page_matches_the_modules() -> None:
    checked = run("--check")
    assert checked.returncode == 0, checked.stderr


def test_every_module_says_what_it_owns_in_its_docstring() -> None:
    printed = run("--print")
    assert printed.returncode == 0, printed.stderr
    undocumented = [line for line in printed.stdout.splitlines() if "(no docstring)" in line]
    assert undocumented == []
    # Positive control: the map names the engine's key module and a worker module.
    assert "  - `keys`: " in printed.stdout
    assert "- `django_rqueue/worker/`: " in printed.stdout
