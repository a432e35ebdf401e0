"""Redis reply values as Python values: text, millisecond timestamps, the server's clock."""

from __future__ import annotations

import datetime

import redis

from .errors import redis_errors


def as_text(value: bytes | str | None, default: str = "") -> str:
    """A Redis reply value as ``str`` (UTF-8; undecodable bytes replaced); ``default`` for None."""
    if value is None:
        return default
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def redis_time_ms(client: redis.Redis) -> int:
    """The Redis server's clock in ms since the epoch (``TIME``).

    Raises:
        RedisUnavailable: Redis cannot be reached.
    """
    with redis_errors(client):
        seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def ms_to_datetime(value: bytes | str | float | None) -> datetime.datetime | None:
    """Milliseconds since the epoch (a number, or as Redis stores it) as an aware UTC datetime.

    ``None``, an empty value or one that is not a number gives ``None``.
    """
    if value is None or value in (b"", ""):
        return None
    try:
        return datetime.datetime.fromtimestamp(float(value) / 1000, tz=datetime.UTC)
    except (TypeError, ValueError, OverflowError):
        return None
