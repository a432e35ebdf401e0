"""The ``manage`` fixture: management commands as real subprocesses (tests/support/processes.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.processes import Manage, ManagedCommand


@pytest.fixture
def manage(tmp_path: Path) -> Iterator[Manage]:
    """Start ``python -m django <name> <args...>``; returns a :class:`ManagedCommand`."""
    started: list[ManagedCommand] = []
    workdir = tmp_path / "commands"
    workdir.mkdir()

    def start(name: str, *args: str) -> ManagedCommand:
        command = ManagedCommand(workdir, len(started), name, args)
        started.append(command)
        return command

    try:
        yield start
    finally:
        for command in started:
            command.kill()
            print(command.report())
