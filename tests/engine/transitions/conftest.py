"""Fixtures for the transition tests: :class:`~tests.support.engine.Engine` on each topology."""

from __future__ import annotations

import pytest
import redis

from django_rqueue.dependencies import EdgePath
from django_rqueue.engine.connection import get_client
from django_rqueue.engine.keys import QueueKeys
from tests.support.engine import PREFIX, QUEUE, Engine


@pytest.fixture(params=["standalone", "cluster"])
def engine(request: pytest.FixtureRequest, rqueue_redis: redis.Redis) -> Engine:
    """The driver on the session's redis-server, then on the session's Redis Cluster (the
    ``redis_cluster`` fixture points ``RQUEUE`` at it: code that calls ``get_client()``
    reaches it too)."""
    if request.param == "cluster":
        request.getfixturevalue("redis_cluster")
        return Engine(get_client(), QueueKeys.of(PREFIX, QUEUE))
    return Engine(rqueue_redis, QueueKeys.of(PREFIX, QUEUE))


@pytest.fixture(params=["i", "o"], ids=["inline", "outbox"])
def path(request: pytest.FixtureRequest) -> EdgePath:
    """The path of every edge a dependency test writes: inline (same queue) or through the
    outbox (the relay's way, for dependents on other queues or Cluster slots)."""
    value: EdgePath = request.param
    return value
