"""The ``faults`` fixture: see :mod:`tests.faults.harness`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.support.redis_server import RedisServer

from .harness import Faults
from .proxy import FaultProxy


@pytest.fixture
def faults(
    tmp_path: Path, rqueue_redis: redis.Redis, redis_server: RedisServer
) -> Iterator[Faults]:
    """A :class:`~tests.faults.harness.Faults` on the session Redis; kills its processes after."""
    harness = Faults(tmp_path, rqueue_redis, redis_server.url)
    try:
        yield harness
    finally:
        harness.stop_all()
        for process in harness.started:
            print(process.report())


@pytest.fixture
def proxy(redis_server: RedisServer) -> Iterator[FaultProxy]:
    """A :class:`~tests.faults.proxy.FaultProxy` in front of the session Redis, closed after."""
    with FaultProxy(redis_server.port) as running:
        yield running
