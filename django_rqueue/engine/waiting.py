"""The Redis side of ``Job.wait`` / ``Job.await_``: mark, read, block, pass the wake-up on.

A waiter first marks the job as awaited (:attr:`~.keys.JobFields.AWAITED`)
and reads it in one step (``mark_awaited.lua``, which writes nothing for a job
that is gone), so a terminal transition that runs after
the read sees the mark and pushes a token to :meth:`~.keys.QueueKeys.done`
(``include/wake_waiters.lua``); one that ran before is seen by the read.
The waiter then blocks on that list (``BLPOP``) in slices shorter than the
socket timeout and reads the job again after each (a token left from an
earlier life of the job, before a ``retry()``, only costs one read). A waiter woken
for good pushes the token back, so every other waiter of the same job wakes
too; the list expires 60 s later. The sync and asyncio variants send the
same commands.
"""

from __future__ import annotations

from typing import Any

import redis
import redis.asyncio

from . import calls
from .connection import MIN_BLOCK, redis_errors
from .keys import QueueKeys
from .scripts import load

#: Longest single ``BLPOP`` in seconds: well under ``connection.SOCKET_TIMEOUT``.
BLOCK_SLICE = 5.0
#: Seconds the wake-up list lives after a push (as ``include/wake_waiters.lua``).
DONE_TTL = 60


def block_seconds(remaining: float) -> float:
    """The ``BLPOP`` timeout for ``remaining`` seconds: at most :data:`BLOCK_SLICE`, and never
    below :data:`~.connection.MIN_BLOCK`."""
    return max(MIN_BLOCK, min(remaining, BLOCK_SLICE))


def _fields(reply: list[Any]) -> dict[bytes, bytes]:
    it = iter(reply)
    return dict(zip(it, it, strict=True))


def mark_and_read(client: redis.Redis, keys: QueueKeys, job_id: str) -> dict[bytes, bytes]:
    """Mark the job as awaited and read it (``mark_awaited.lua``); ``{}`` when it is gone."""
    call = calls.mark_awaited(keys, job_id)
    with redis_errors(client):
        return _fields(load(call.script)(client, call.keys, call.args))


def block(client: redis.Redis, keys: QueueKeys, job_id: str, seconds: float) -> bool:
    """``BLPOP`` the job's wake-up list for up to ``seconds``; whether a token came."""
    with redis_errors(client):
        return client.blpop([keys.done(job_id)], timeout=block_seconds(seconds)) is not None


def pass_on(client: redis.Redis, keys: QueueKeys, job_id: str) -> None:
    """Push the token back for the job's other waiters (the list expires on its own)."""
    done = keys.done(job_id)
    with redis_errors(client):
        pipe = client.pipeline(transaction=True)
        pipe.rpush(done, 1)
        pipe.expire(done, DONE_TTL)
        pipe.execute()


async def amark_and_read(
    client: redis.asyncio.Redis, keys: QueueKeys, job_id: str
) -> dict[bytes, bytes]:
    """:func:`mark_and_read` on an asyncio client."""
    call = calls.mark_awaited(keys, job_id)
    with redis_errors(client):
        return _fields(await load(call.script).acall(client, call.keys, call.args))


async def ablock(client: redis.asyncio.Redis, keys: QueueKeys, job_id: str, seconds: float) -> bool:
    """:func:`block` on an asyncio client."""
    with redis_errors(client):
        got = await client.blpop([keys.done(job_id)], timeout=block_seconds(seconds))
    return got is not None


async def apass_on(client: redis.asyncio.Redis, keys: QueueKeys, job_id: str) -> None:
    """:func:`pass_on` on an asyncio client."""
    done = keys.done(job_id)
    with redis_errors(client):
        pipe = client.pipeline(transaction=True)
        pipe.rpush(done, 1)
        pipe.expire(done, DONE_TTL)
        await pipe.execute()
