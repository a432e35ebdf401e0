"""Fixtures of the workflow tests."""

from __future__ import annotations

from typing import Literal

import pytest
from pytest_django.fixtures import Settings

from tests.management.commands.conftest import manage

#: The path an edge between two jobs of one queue takes.
type DepPath = Literal["inline", "outbox"]


@pytest.fixture(params=["inline", "outbox"])
def dep_path(request: pytest.FixtureRequest, settings: Settings) -> DepPath:
    """Each test using it runs twice: edges inline where they can be, then every edge
    through the outbox and every creation staged (``RQUEUE["WORKFLOW_FORCE_OUTBOX"]``)."""
    path: DepPath = request.param
    settings.RQUEUE = {**settings.RQUEUE, "WORKFLOW_FORCE_OUTBOX": path == "outbox"}
    return path


#: ``manage`` (a management command as a real subprocess) serves test_worker_process.py.
__all__ = ["dep_path", "manage"]
