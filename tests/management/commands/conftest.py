"""The ``manage`` fixture: management commands as real subprocesses (tests/support/processes.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.processes import CommandProcess, Processes

type Manage = Callable[..., CommandProcess]


@pytest.fixture
def manage(tmp_path: Path) -> Iterator[Manage]:
    """Start ``python -m django <name> <args...>``; returns a :class:`CommandProcess`."""
    processes = Processes(tmp_path / "commands")
    try:
        yield processes.start
    finally:
        processes.kill_all()
        print(processes.reports())
