"""The job functions the enqueue tests share, and looks at what they wrote to Redis."""

from __future__ import annotations

import redis

from django_rqueue import job
from django_rqueue.engine.keys import QueueKeys
from django_rqueue.worker.loop import Worker

#: The calls :func:`add` and :func:`bare` ran (in this process: eager, or an in-process worker).
calls: list[tuple[object, ...]] = []


@job
def add(x: int, y: int = 0) -> int:
    calls.append((x, y))
    return x + y


@job
def bare(x: int) -> int:
    calls.append((x,))
    return x * 2


@job(name="custom.name", queue="emails", priority=10, timeout=7, max_attempts=9, result_ttl=60)
def configured(to: str) -> None:
    return None


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


def job_hash(client: redis.Redis, job_id: str, queue: str = "default") -> dict[str, str]:
    """The job hash of ``job_id`` in ``queue``, decoded."""
    raw: dict[bytes, bytes] = client.hgetall(QueueKeys.of("rqueue", queue).job(job_id))  # type: ignore[assignment]
    return {k.decode(): v.decode() for k, v in raw.items()}


def server_ms(client: redis.Redis) -> int:
    """The Redis server's clock, in ms since the epoch."""
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def work_one() -> None:
    """Run one job of the ``default`` queue in this process (one must be there)."""
    assert Worker(["default"], with_poller=False).work_once()
