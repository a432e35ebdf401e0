"""The webhook tests deliver to real servers on 127.0.0.1: loopback is allowed here unless a
test says otherwise (tests/contrib/webhooks/test_destinations.py)."""

from __future__ import annotations

import pytest
import redis
from pytest_django.fixtures import Settings as SettingsFixture


@pytest.fixture(autouse=True)
def allow_loopback(settings: SettingsFixture, rqueue_redis: redis.Redis) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "WEBHOOKS": {"ALLOWED_HOSTS": ["127.0.0.1"]}}
