"""What the host and Redis allow, measured beside each system's enqueue.

On these machines the loopback round trip swings up to 10x between minutes,
so a rate means something only beside a ceiling measured in the same process
and minute. The enqueue-one-by-one phase alternates chunks of the system's
``enqueue_one`` with chunks of these probes, one connection each:

- ``raw_ping``: a raw socket sending ``PING`` and reading ``+PONG`` (the
  round trip with no client library at all);
- ``redis_py_ping``: redis-py's ``PING`` (the library's own cost added);
- ``evalsha_noop``: ``EVALSHA`` of ``return 1`` (script dispatch added);
- ``evalsha_two_writes``: ``EVALSHA`` of a script with two writes (an
  ``HSET`` of a 100-byte field and an ``LPUSH``), the least an enqueue that
  keeps a job record and a queue can do in one round trip: the ceiling of
  "enqueue one by one";
- ``pipelined_lpush``: ``LPUSH`` in pipelines of 100 (what Redis does when
  round trips are amortised: the ceiling of bulk enqueue).

Rates are operations per second; the table reports each system's enqueue one
by one as a percentage of ``evalsha_two_writes`` measured next to it, and its
drain with one process against the same ceiling (one script call per job is
what a drain costs at least without batching).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from urllib.parse import urlsplit

import redis

#: Probe name -> what it measures (the order of the report).
PROBES = {
    "raw_ping": "raw-socket PING",
    "redis_py_ping": "redis-py PING",
    "evalsha_noop": "EVALSHA of return 1",
    "evalsha_two_writes": "EVALSHA of HSET + LPUSH",
    "pipelined_lpush": "LPUSH, pipelines of 100",
}
TWO_WRITES = """
redis.call('HSET', KEYS[1], 'p', ARGV[1])
redis.call('LPUSH', KEYS[2], ARGV[2])
return 1
"""
PIPELINE = 100
PAYLOAD = "x" * 100


class Ceiling:
    """The probes on one Redis (``url``); :meth:`run` measures ``n`` operations of each."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.address = (parts.hostname or "127.0.0.1", parts.port or 6379)
        self.client = redis.Redis.from_url(url)
        self.sock = socket.create_connection(self.address)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.noop = self.client.script_load("return 1")
        self.two_writes = self.client.script_load(TWO_WRITES)
        self.totals: dict[str, list[float]] = {name: [0.0, 0.0] for name in PROBES}
        self.counter = 0

    def close(self) -> None:
        self.sock.close()
        self.client.close()

    def run(self, n: int) -> None:
        """Measure ``n`` operations of every probe; add them to :attr:`totals`."""
        probes: dict[str, Callable[[int], None]] = {
            "raw_ping": self._raw_ping,
            "redis_py_ping": self._redis_py_ping,
            "evalsha_noop": self._evalsha_noop,
            "evalsha_two_writes": self._evalsha_two_writes,
            "pipelined_lpush": self._pipelined_lpush,
        }
        for name, probe in probes.items():
            t = time.perf_counter()
            probe(n)
            self.totals[name][0] += n
            self.totals[name][1] += time.perf_counter() - t

    def rates(self) -> dict[str, float]:
        """Operations per second of each probe over everything :meth:`run` measured."""
        return {name: ops / secs for name, (ops, secs) in self.totals.items() if secs > 0}

    def cleanup(self) -> None:
        """Delete what the write probes left (so the system's own phase starts clean)."""
        keys = list(self.client.scan_iter(match="ceiling:*", count=1000))
        for start in range(0, len(keys), 1000):
            self.client.delete(*keys[start : start + 1000])

    # -- probes ------------------------------------------------------------------

    def _raw_ping(self, n: int) -> None:
        request, reply = b"*1\r\n$4\r\nPING\r\n", b"+PONG\r\n"
        for _ in range(n):
            self.sock.sendall(request)
            got = b""
            while len(got) < len(reply):
                got += self.sock.recv(64)

    def _redis_py_ping(self, n: int) -> None:
        for _ in range(n):
            self.client.ping()

    def _evalsha_noop(self, n: int) -> None:
        for _ in range(n):
            self.client.evalsha(self.noop, 0)

    def _evalsha_two_writes(self, n: int) -> None:
        for _ in range(n):
            self.counter += 1
            self.client.evalsha(
                self.two_writes, 2, f"ceiling:job:{self.counter}", "ceiling:queue", PAYLOAD, "id"
            )

    def _pipelined_lpush(self, n: int) -> None:
        pipe = self.client.pipeline(transaction=False)
        for i in range(n):
            pipe.lpush("ceiling:bulk", PAYLOAD)
            if (i + 1) % PIPELINE == 0:
                pipe.execute()
        pipe.execute()
