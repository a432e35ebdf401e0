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
    with Faults.session(tmp_path, rqueue_redis, redis_server.url) as harness:
        yield harness


@pytest.fixture
def proxy(redis_server: RedisServer) -> Iterator[FaultProxy]:
    """A :class:`~tests.faults.proxy.FaultProxy` in front of the session Redis, closed after."""
    with FaultProxy(redis_server.port) as running:
        yield running


@pytest.fixture
def slowlog(redis_client: redis.Redis) -> Iterator[None]:
    """Log every command with its arguments (``SLOWLOG``), restored afterwards."""
    config = {str(k): str(v) for k, v in redis_client.config_get("slowlog-*").items()}
    redis_client.config_set("slowlog-max-len", 100_000)
    redis_client.config_set("slowlog-log-slower-than", 0)
    redis_client.slowlog_reset()
    try:
        yield
    finally:
        for name, value in config.items():
            redis_client.config_set(name, value)
        redis_client.slowlog_reset()
