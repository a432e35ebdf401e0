"""One adapter per queue system: how to enqueue the no-op job and how to start its workers.

Every adapter module is also what that system's worker imports (it defines
the app / broker / task at import time from ``BENCH_REDIS_URL``), so
importing one costs the harness only that system's library.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

#: name -> module; the order of the table.
MODULES = {
    "django-rqueue": "bench.systems.rqueue_sys",
    "RQ (SimpleWorker)": "bench.systems.rq_sys",
    "Celery (prefork)": "bench.systems.celery_sys",
    "Dramatiq (2 threads/proc)": "bench.systems.dramatiq_sys",
    "Huey": "bench.systems.huey_sys",
    "arq": "bench.systems.arq_sys",
}
#: name -> distributions to report versions of (first one must be importable).
DISTRIBUTIONS = {
    "django-rqueue": ["django-rqueue", "Django"],
    "RQ (SimpleWorker)": ["rq"],
    "Celery (prefork)": ["celery", "kombu"],
    "Dramatiq (2 threads/proc)": ["dramatiq"],
    "Huey": ["huey"],
    "arq": ["arq"],
}


def redis_url() -> str:
    return os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")


def paced(n: int, gap: float) -> Iterator[int]:
    """Yield 0..n-1, the i-th at start + i * gap (busy-waits the last 2 ms for precision)."""
    start = time.perf_counter()
    for i in range(n):
        target = start + i * gap
        while True:
            left = target - time.perf_counter()
            if left <= 0:
                break
            time.sleep(left - 0.002 if left > 0.003 else 0)
        yield i


#: Seconds each job of the async I/O drain awaits (``asyncio.sleep``).
ASYNC_SLEEP = 0.1
#: Coroutines run at once per worker process in the async I/O drain.
ASYNC_CONCURRENCY = 100


class System:
    """Interface every adapter implements (see the modules in this package)."""

    name = ""
    has_bulk = True
    #: Whether the system runs ``async def`` jobs concurrently (the async I/O drain).
    has_async = False
    #: Whether the system is a ``django.tasks`` backend (enqueue through ``Task.enqueue``).
    has_tasks = False
    #: Whether the system composes jobs: a chord of members and a body (bench/workflows.py).
    has_workflows = False

    def enqueue_one(self, n: int, out: str) -> None:
        """Enqueue ``n`` jobs one call at a time."""
        raise NotImplementedError

    def enqueue_bulk(self, n: int, out: str) -> None:
        """Enqueue ``n`` jobs with the system's own bulk API (when ``has_bulk``)."""
        raise NotImplementedError

    def enqueue_paced(self, n: int, gap: float, out: str) -> None:
        """Enqueue ``n`` jobs ``gap`` seconds apart, each with ``sent`` = time of its call."""
        raise NotImplementedError

    def enqueue_delayed(self, dues: list[float], out: str) -> None:
        """Enqueue one job due at each wall-clock time in ``dues``."""
        raise NotImplementedError

    def enqueue_async(self, n: int, out: str) -> None:
        """Enqueue ``n`` async jobs that await ``ASYNC_SLEEP`` s, then record (``has_async``)."""
        raise NotImplementedError

    def async_worker_argvs(self, processes: int) -> list[list[str]]:
        """Commands that start ``processes`` workers, each running ``ASYNC_CONCURRENCY``
        coroutines at once."""
        raise NotImplementedError

    def enqueue_tasks(self, n: int, out: str) -> None:
        """Enqueue ``n`` jobs one by one through ``django.tasks`` (when ``has_tasks``)."""
        raise NotImplementedError

    def enqueue_chord(self, n: int, out: str) -> None:
        """Write ``n`` members, each recording ``(sent, 0, now)`` to ``out``, and a body that
        runs once they all ended and records ``(sent, -1, now)`` (when ``has_workflows``)."""
        raise NotImplementedError

    def after_flush(self) -> None:
        """Called after FLUSHALL, before enqueuing (re-create what the system needs)."""

    def worker_argvs(self, processes: int) -> list[list[str]]:
        """Commands that start ``processes`` worker processes (one or several commands)."""
        raise NotImplementedError

    def worker_env(self) -> dict[str, str]:
        return {}

    def close(self) -> None:
        pass


def load(name: str) -> System:
    module: Any = importlib.import_module(MODULES[name])
    system: System = module.make()
    system.name = name
    return system


PYTHON = sys.executable


def venv_bin(name: str) -> str:
    """Path of a console script installed next to this interpreter."""
    return str(Path(sys.executable).parent / name)
