"""The transitions the staff side and periodic runs still call by name, over commands and run.

Each function sends one :mod:`~.commands` command with :func:`.run.execute`
and returns its parsed reply (:mod:`~.replies`); new code calls those
directly (``run.execute(client, commands.<transition>(...))``), as the rest
of the package does. Raises what the command's parser raises
(:class:`~django_rqueue.exceptions.JobStateError`, ...) and
:class:`~django_rqueue.exceptions.RedisUnavailable`.
"""

from __future__ import annotations

import redis

from . import commands
from .calls import FailedBatchMode, NewJob
from .keys import QueueKeys
from .replies import Enqueued, EnqueueOutcome
from .run import execute

__all__ = [
    "EnqueueOutcome",
    "Enqueued",
    "empty_queue",
    "failed_batch",
    "pause",
    "resume",
    "schedule_run_now",
]


def failed_batch(
    client: redis.Redis,
    keys: QueueKeys,
    *,
    mode: FailedBatchMode,
    limit: int,
    offset: int,
    upto_ms: int,
    name: str = "",
) -> tuple[int, int, int, int]:
    """Retry or delete one batch of failed jobs (``failed_batch.lua``).

    Returns ``(done, skipped, stale, scanned)``: see the script's header.
    """
    command = commands.failed_batch(
        keys, mode=mode, limit=limit, offset=offset, upto_ms=upto_ms, name=name
    )
    return execute(client, command)


def empty_queue(client: redis.Redis, keys: QueueKeys, limit: int) -> tuple[int, int, bool]:
    """Delete up to ``limit`` queued jobs of the queue, in serving order (``empty_queue.lua``).

    Returns ``(deleted, dropped, more)``: jobs deleted, stale ids dropped from the
    lists, and whether queued jobs are left (call again).
    """
    return execute(client, commands.empty_queue(keys, limit))


def schedule_run_now(client: redis.Redis, keys: QueueKeys, job: NewJob, *, entry: str) -> Enqueued:
    """Enqueue ``entry``'s ``job`` now and record it as its latest run
    (``schedule_run_now.lua``)."""
    return execute(client, commands.schedule_run_now(keys, job, entry=entry))


def pause(client: redis.Redis, keys: QueueKeys) -> bool:
    """Stop the queue from handing out jobs (``pause.lua``); it still accepts them.

    Returns whether it was running (``False``: already paused, the first
    pause's time is kept). Jobs already running finish and report as usual.
    """
    return execute(client, commands.pause(keys))


def resume(client: redis.Redis, keys: QueueKeys) -> bool:
    """Let a paused queue hand out jobs again and wake its idle workers (``resume.lua``).

    Returns whether it was paused (``False``: nothing changed).
    """
    return execute(client, commands.resume(keys))
