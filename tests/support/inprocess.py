"""Helpers for tests that run a worker or a poller in the test process.

Each in-process worker runs under a watchdog that stops it (and fails the
test) if it does not finish; each poller thread is stopped and joined before
the test ends, so no thread outlives its test and touches the next test's
Redis data.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import redis

from django_rqueue.conf import get_config
from django_rqueue.engine.connection import get_client
from django_rqueue.engine.keys import QueueKeys
from django_rqueue.worker.loop import Worker
from django_rqueue.worker.poller import Poller
from tests.jobs_app.jobs import read_ledger


def keys(queue: str = "default") -> QueueKeys:
    return QueueKeys.of(get_config().key_prefix, queue)


def run_worker(
    queues: Sequence[str] = ("default",), *, limit: float = 30.0, **options: Any
) -> Worker:
    """Run ``Worker(queues, **options)`` here; fail if it still runs after ``limit`` s.

    ``with_poller`` defaults to False here: tests that need promotion run
    :func:`poller_thread`, which is joined before the test ends.
    """
    options.setdefault("with_poller", False)
    worker = Worker(list(queues), **options)
    run_to_end(worker, limit)
    return worker


def run_to_end(worker: Worker, limit: float = 30.0) -> None:
    """Run ``worker`` here (it must end by itself: ``burst``, ``max_jobs``); fail if it
    still runs after ``limit`` s."""
    fired = threading.Event()

    def watchdog() -> None:
        fired.set()
        worker.request_stop()

    timer = threading.Timer(limit, watchdog)
    timer.daemon = True
    timer.start()
    try:
        assert worker.run() == 0
    finally:
        timer.cancel()
    assert not fired.is_set(), f"worker did not finish within {limit} s"


@contextmanager
def poller_thread(queues: Sequence[str] = ("default",), **options: Any) -> Iterator[Poller]:
    """A :class:`Poller` in a thread, stopped and joined on exit."""
    poller = Poller(list(queues), **options)
    thread = threading.Thread(target=poller.run, name="test-poller", daemon=True)
    thread.start()
    try:
        yield poller
    finally:
        poller.stop.set()
        for queue in queues:  # wake it from its blocking wait
            get_client(queue).rpush(keys(queue).wake, "1")
        thread.join(10)
        assert not thread.is_alive(), "poller thread did not stop"


def tags(ledger: str, event: str = "run") -> list[str]:
    return [e["tag"] for e in read_ledger(ledger) if e["event"] == event]


def text(value: bytes | str) -> str:
    """A Redis reply as ``str`` (the test clients return bytes)."""
    return value.decode() if isinstance(value, bytes) else value


def stats(client: redis.Redis, queue: str = "default") -> dict[str, int]:
    """The queue's counters hash (``queued``, ``succeeded``, ``failed``)."""
    return {text(k): int(v) for k, v in client.hgetall(keys(queue).stats).items()}


def queued_ids(client: redis.Redis, group: str = "", priority: int = 0) -> list[str]:
    """The ids in one group's FIFO list, oldest first."""
    return [text(i) for i in client.lrange(keys().group(priority, group), 0, -1)]
