"""Helpers shared by the network/Redis fault scenarios (8-14); see also :mod:`.harness`."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import redis

from .harness import wait_until


def blocked_clients(client: redis.Redis) -> int:
    """Connections blocked in a command right now (``CLIENT LIST`` flag ``b``)."""
    return sum(1 for c in client.client_list() if "b" in c.get("flags", ""))


def wait_blocked(client: redis.Redis, count: int, timeout: float = 15.0) -> None:
    """Until at least ``count`` connections sit blocked (idle workers and pollers)."""
    wait_until(
        lambda: blocked_clients(client) >= count,
        timeout=timeout,
        interval=0.05,
        message=f"fewer than {count} clients blocked on Redis",
    )


def hold(seconds: float, check: Callable[[], Any], message: str) -> None:
    """Keep a fault in place for ``seconds``, asserting ``check()`` all along.

    This is the fault's duration, not a wait for a condition: the scenario
    wants the fault to last that long, and the check (e.g. "the worker is
    still alive") makes the time useful.
    """
    deadline = time.monotonic() + seconds
    while True:
        assert check(), message
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        time.sleep(min(0.1, remaining))


def command_calls(client: redis.Redis) -> dict[str, int]:
    """``INFO commandstats`` as ``{command: calls}``."""
    stats = client.info("commandstats")
    return {
        name.removeprefix("cmdstat_"): int(value["calls"])
        for name, value in stats.items()
        if isinstance(value, dict)
    }
