"""The one no-op job body every system runs, and reading back what it wrote.

A job gets ``(sent, due, out)``: ``sent`` is the wall-clock time just before
the enqueue call, ``due`` the time it was scheduled for (0 when not delayed),
``out`` a file path. It appends ``"<sent> <due> <now>"`` to ``out`` with one
``O_APPEND`` write (atomic for such short lines, so processes and threads can
share the file) and no Redis round trip, so recording costs every system the
same few microseconds and nothing on the queue's own Redis. ``out == ""``
records nothing (jobs that are only enqueued).

``BENCH_JOB_BODY=incr`` in a worker's environment (the harness sets it for the
"INCR body" drains) adds one Redis round trip to every recorded job, an
``INCR`` on the bench's Redis through redis-py, as real jobs talk to Redis or
a database: a queue whose per-job overhead hides behind a free body shows it
there.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

_fds: dict[tuple[int, str], int] = {}
_lock = threading.Lock()
#: Per process: the redis-py client of the INCR body (``None``: the plain body).
_incr: dict[int, Any] = {}


def _body() -> None:
    """The job's own work beside recording: nothing, or one ``INCR`` (``BENCH_JOB_BODY``)."""
    if os.environ.get("BENCH_JOB_BODY", "append") != "incr":
        return
    client = _incr.get(os.getpid())
    if client is None:
        import redis

        client = _incr[os.getpid()] = redis.Redis.from_url(
            os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
        )
    client.incr("bench:incr")


def record(sent: float, due: float, out: str) -> None:
    if not out:
        return
    _body()
    now = time.time()
    key = (os.getpid(), out)
    fd = _fds.get(key)
    if fd is None:
        with _lock:
            fd = _fds.get(key)
            if fd is None:
                fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                _fds[key] = fd
    os.write(fd, f"{sent:.6f} {due:.6f} {now:.6f}\n".encode())


def read(out: str) -> list[tuple[float, float, float]]:
    """Every ``(sent, due, ran)`` recorded in ``out`` so far (complete lines only)."""
    try:
        with open(out, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    rows = []
    for line in data.split(b"\n"):
        parts = line.split()
        if len(parts) == 3:
            rows.append((float(parts[0]), float(parts[1]), float(parts[2])))
    return rows


def count(out: str) -> int:
    try:
        with open(out, "rb") as f:
            return f.read().count(b"\n")
    except FileNotFoundError:
        return 0
