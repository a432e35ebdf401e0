"""Fixtures of the enqueue tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from django_rqueue import signals


@pytest.fixture
def enqueued() -> Iterator[list[str]]:
    """The ids of the jobs ``job_enqueued`` announces during the test, in order."""
    ids: list[str] = []

    def receiver(sender: object, job: Any, **kwargs: object) -> None:
        ids.append(job.id)

    signals.job_enqueued.connect(receiver)
    try:
        yield ids
    finally:
        signals.job_enqueued.disconnect(receiver)
