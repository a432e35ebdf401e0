"""Fixtures of the master's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.master.support import FakeChild, fake_child


@pytest.fixture
def supervised() -> Iterator[FakeChild]:
    """A master with one child record fed through a real pipe (:func:`~.support.fake_child`)."""
    yield from fake_child()
