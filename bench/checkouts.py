"""The A/B benches' two sides: another commit checked out beside this one, and one
measuring process run in either (bench/regression.py, bench/transition_cost.py)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
GIT = shutil.which("git") or "/usr/bin/git"
#: The repository's own venv: both sides run with the same libraries.
PYTHON = str(REPO / ".venv" / "bin" / "python")


@contextlib.contextmanager
def other_checkout(commit: str) -> Iterator[Path]:
    """``commit`` checked out in a temporary git worktree, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="rqueue-ab-") as tmp:
        path = Path(tmp) / "other"
        subprocess.run(
            [GIT, "-C", str(REPO), "worktree", "add", "-q", "--detach", str(path), commit],
            check=True,
        )
        try:
            yield path
        finally:
            subprocess.run([GIT, "-C", str(REPO), "worktree", "remove", "--force", str(path)])


def measure(
    name: str,
    checkout: Path,
    script: str,
    argv: list[str],
    env: Mapping[str, str],
    python: str = PYTHON,
) -> dict[str, Any]:
    """Run ``python -c script *argv`` in ``checkout`` (its cwd and ``PYTHONPATH``) with
    ``env`` added; return the JSON object its last line prints. Exits naming ``name`` and
    showing the process's stderr when it fails. ``python``: the interpreter (default: the
    repository's venv, so that both sides of an A/B run the same libraries)."""
    done = subprocess.run(
        [python, "-c", script, *argv],
        env={**os.environ, **env, "PYTHONPATH": str(checkout)},
        cwd=checkout,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        sys.stderr.write(done.stderr)
        raise SystemExit(f"{name}: exit {done.returncode}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result
