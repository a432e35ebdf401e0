"""The worker registry: what each running worker publishes about itself.

A supervisor publishes a hash (:func:`~django_rqueue.master.heartbeat.publish`)
every heartbeat and renews its TTL; the hash expires one lease after the worker's
last heartbeat, so a dead worker disappears from :func:`list_workers` within one
lease without anyone cleaning up after it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import redis

from ..conf import get_config
from ..engine.connection import as_text, get_client, redis_errors, wrong_type
from ..engine.keys import worker_key, workers_key
from ..serialization import loads


@dataclasses.dataclass(frozen=True)
class WorkerJob:
    """A job a worker runs, as its heartbeat tells."""

    id: str
    queue: str
    #: The child process that runs it.
    pid: int = 0


@dataclasses.dataclass(frozen=True)
class WorkerInfo:
    """What a worker (a supervisor) publishes about itself at each heartbeat.

    Times are Redis time in ms since the epoch. A field a worker did not
    publish reads as its default (``poller``: True, as a worker runs one unless
    started with ``--without-poller``).
    """

    id: str
    host: str = ""
    pid: int = 0
    queues: tuple[str, ...] = ()
    #: Worker children it runs.
    concurrency: int = 0
    jobs: tuple[WorkerJob, ...] = ()
    #: Jobs its children finished, and how many of those failed for good.
    processed: int = 0
    failed: int = 0
    started_at: int = 0
    poller: bool = True
    #: Set by :func:`~django_rqueue.master.heartbeat.publish`.
    heartbeat: int = 0
    #: What was wrong with a corrupt published hash (values of the wrong type read as
    #: their defaults); empty for a sound one. Not published.
    problems: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """The info as plain JSON-ready values (``rqueue_info --json``)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_hash(cls, worker_id: str, fields: Mapping[bytes | str, bytes | str]) -> WorkerInfo:
        """Read a published hash; values of the wrong type read as the default, and are
        named in :attr:`problems`. Never raises on corrupt data (JSON is decoded with
        :func:`~django_rqueue.serialization.loads`, bounded in depth and size)."""
        raw: dict[str, Any] = {}
        for name, value in fields.items():
            text = as_text(value)
            try:
                raw[as_text(name)] = loads(text)
            except ValueError:
                raw[as_text(name)] = text
        problems: list[str] = []

        def number(name: str, value: Any = None) -> int:
            value = raw.get(name) if value is None else value
            if isinstance(value, int) and not isinstance(value, bool):
                return value
            if value is not None:
                problems.append(f"{name} is not an integer: {str(value)[:40]!r}")
            return 0

        jobs: list[WorkerJob] = []
        listed = raw.get("jobs", [])
        if not isinstance(listed, list):
            problems.append(f"jobs is not a list: {str(listed)[:40]!r}")
            listed = []
        for j in listed:
            if isinstance(j, dict):
                pid = number("pid", j.get("pid", 0))
                jobs.append(WorkerJob(str(j.get("id", "")), str(j.get("queue", "")), pid))
            else:
                problems.append(f"a job is not an object: {str(j)[:40]!r}")
        queues = raw.get("queues", [])
        if not isinstance(queues, list):
            problems.append(f"queues is not a list: {str(queues)[:40]!r}")
            queues = []
        return cls(
            id=worker_id,
            host=str(raw.get("host", "")),
            pid=number("pid"),
            queues=tuple(map(str, queues)),
            concurrency=number("concurrency"),
            jobs=tuple(jobs),
            processed=number("processed"),
            failed=number("failed"),
            started_at=number("started_at"),
            poller=raw.get("poller", True) is not False,
            heartbeat=number("heartbeat"),
            problems=tuple(problems),
        )


def list_workers() -> list[WorkerInfo]:
    """Return the live workers' published info, oldest first.

    Workers whose hash expired are dropped from the registry as a side effect.

    Raises:
        RedisUnavailable: Redis cannot be reached.
    """
    prefix = get_config().key_prefix
    client = get_client()
    with redis_errors(client):
        try:
            members: list[bytes] = client.zrange(workers_key(prefix), 0, -1)  # type: ignore[assignment]
        except redis.ResponseError as exc:
            if not wrong_type(exc):
                raise
            return []  # not a registry: no worker can be listed
        ids = [as_text(i) for i in members]
        pipe = client.pipeline(transaction=False)
        for worker_id in ids:
            pipe.hgetall(worker_key(prefix, worker_id))
        hashes = pipe.execute(raise_on_error=False)
    found: list[WorkerInfo] = []
    gone: list[str] = []
    for worker_id, fields in zip(ids, hashes, strict=True):
        if isinstance(fields, Exception):
            if not wrong_type(fields):
                raise fields
            found.append(WorkerInfo(worker_id, problems=(f"unreadable: {fields}",)))
            continue
        if not fields:
            gone.append(worker_id)
            continue
        found.append(WorkerInfo.from_hash(worker_id, fields))
    if gone:
        with redis_errors(client):
            client.zrem(workers_key(prefix), *gone)
    return found
