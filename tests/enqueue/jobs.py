"""The job functions the enqueue tests share, and a look at the job records in Redis."""

from __future__ import annotations

import redis

from django_rqueue import job
from django_rqueue.engine.keys import QueueKeys

#: The calls :func:`add` ran (eager mode runs it in the test's process).
calls: list[tuple[object, ...]] = []


@job
def add(x: int, y: int = 0) -> int:
    calls.append((x, y))
    return x + y


@job(unique_key=lambda user_id: f"digest:{user_id}")
def digest(user_id: int) -> None:
    return None


@job
def carry(data: str) -> None:
    return None


def job_ids(client: redis.Redis, queue: str = "default") -> set[str]:
    """The ids of the job records of ``queue`` in Redis."""
    prefix = QueueKeys.of("rqueue", queue).job("")
    return {k.decode()[len(prefix) :] for k in client.scan_iter(match=prefix + "*")}
