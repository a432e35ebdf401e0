"""A Redis that refuses the credentials is reported as such at ``.delay()`` (a real
redis-server with ``requirepass``), not as "unreachable"."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from pytest_django.fixtures import Settings

from django_rqueue import RedisAuthenticationFailed, RedisUnavailable, job
from django_rqueue.engine.connection import reset_clients
from tests.support.redis_server import RedisServer, password_protected


@job
def ping() -> None:
    return None


@pytest.fixture
def password_redis() -> Iterator[RedisServer]:
    """A Redis that wants the password ``s3cret``."""
    with password_protected("s3cret") as server:
        yield server


@pytest.mark.parametrize("password", ["", "wrong"])
def test_delay_reports_refused_credentials_as_an_authentication_error(
    password: str, password_redis: RedisServer, settings: Settings
) -> None:
    url = password_redis.url.replace(
        "redis://", f"redis://:{password}@" if password else "redis://"
    )
    settings.RQUEUE = {**settings.RQUEUE, "REDIS_URL": url}
    reset_clients()
    try:
        started = time.monotonic()
        server = f"redis://127.0.0.1:{password_redis.port}/0"  # named, without the password
        with pytest.raises(
            RedisAuthenticationFailed, match=f"^Redis at {server} rejected the credentials"
        ) as caught:
            ping.delay()
        elapsed = time.monotonic() - started
    finally:
        reset_clients()
    assert isinstance(caught.value, RedisUnavailable)  # existing except clauses still work
    assert "unreachable" not in str(caught.value)
    assert "wrong" not in str(caught.value)
    assert "redis://user:password@host:port/db" in str(caught.value)
    assert password_redis.client(password="s3cret").dbsize() == 0
    print(f"refused in {elapsed:.2f} s")


def test_delay_names_an_unreachable_server_without_its_password(settings: Settings) -> None:
    server = RedisServer().start()
    port = server.port
    server.close()
    settings.RQUEUE = {**settings.RQUEUE, "REDIS_URL": f"redis://:s3cret@127.0.0.1:{port}/0"}
    reset_clients()
    try:
        with pytest.raises(RedisUnavailable) as caught:
            ping.delay()
    finally:
        reset_clients()
    message = str(caught.value)
    assert message.startswith(f"Redis at redis://127.0.0.1:{port}/0 is unreachable: "), message
    assert "s3cret" not in message
