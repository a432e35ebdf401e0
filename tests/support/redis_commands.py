"""Redis commands seen from outside: blocked clients, command counts, a MONITOR of one server."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, Self

import redis

from tests.support.waiting import wait_until


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


class CommandMonitor:
    """Count the commands clients send to Redis (``MONITOR``), in a thread.

    ``INFO commandstats`` also counts the commands a Lua script runs inside
    Redis; ``MONITOR`` tags those ``lua``, so :attr:`calls` holds what clients
    sent (one per round trip or pipelined command) and :attr:`lua` the rest.
    Stopped by a sentinel ``ECHO`` sent on another connection (a socket
    timeout would end the ``MONITOR`` session mid-read).
    """

    STOP = "rqueue-test-monitor-stop"

    def __init__(self, port: int) -> None:
        self.port = port
        self.calls: Counter[str] = Counter()
        self.lua: Counter[str] = Counter()
        self.started = self.stopped = 0.0
        self._client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=60)
        self._monitor = self._client.monitor()
        self._thread = threading.Thread(target=self._listen, name="monitor", daemon=True)

    @property
    def seconds(self) -> float:
        return self.stopped - self.started

    def __enter__(self) -> Self:
        self._monitor.__enter__()
        self.started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stopped = time.monotonic()
        with redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5) as other:
            other.echo(self.STOP)
        self._thread.join(timeout=10)
        self._monitor.__exit__()
        self._client.close()

    def _listen(self) -> None:
        while True:
            entry = self._monitor.next_command()
            command = str(entry["command"])
            if self.STOP in command:
                return
            name = command.split(" ", 1)[0].lower()
            (self.lua if entry["client_type"] == "lua" else self.calls)[name] += 1
