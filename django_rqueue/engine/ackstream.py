"""Acks sent without waiting for their replies: pipelined on one connection.

A worker that reserved a batch of jobs (``reserve.lua`` / ``ack_reserve.lua``
with a count) sends each job's ack the moment the job returns, and reads the
replies only when it next has to wait for Redis anyway (when it acks the last
job of the batch and reserves the next batch). This is Redis pipelining
(https://redis.io/docs/latest/develop/use/pipelining/) spread over the jobs
of a batch: Redis applies each ack as soon as its bytes arrive, so a worker
killed after the send has not lost the ack, and no job's success waits on
the jobs after it. What is deferred is only the worker learning that an ack
was refused (stale fencing token: the run is then discarded, as with a
synchronous ack, just noticed later).

Replies that cannot be read (the connection broke, or Redis lost its script
cache: ``NOSCRIPT``) come back as ``None``: the caller resends those acks
synchronously; acks are idempotent under their token, so an ack that was in
fact applied reads as applied again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis

from ..exceptions import LeaseLost
from . import transitions
from .keys import QueueKeys
from .scripts import load


@dataclass(frozen=True)
class PendingAck:
    """An ack sent on the stream whose reply is not read yet."""

    queue: str
    keys: QueueKeys
    job_id: str
    token: int
    result: str
    result_ttl: int


class AckStream:
    """One dedicated connection of ``client``'s pool that acks are written to.

    ``send`` writes an ``EVALSHA ack`` and returns at once; ``collect`` reads
    every reply still owed, in order, and returns ``(ack, verdict)`` pairs:
    verdict ``True`` (applied), a :class:`~.exceptions.LeaseLost` (stale
    token: nothing changed), or ``None`` (reply unknown: resend it
    synchronously). ``close`` gives the connection back to the pool.
    """

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.pending: list[PendingAck] = []
        self._connection: Any = None
        #: Acks whose send failed: their verdict is None.
        self._unsent: list[PendingAck] = []

    @property
    def owed(self) -> bool:
        """Whether :meth:`collect` has verdicts to return."""
        return bool(self.pending or self._unsent)

    def send(self, ack: PendingAck) -> None:
        """Write ``ack`` to Redis without waiting for the reply."""
        keys = ack.keys
        script = load("ack")
        try:
            if self._connection is None:
                self._connection = self.client.connection_pool.get_connection()
            self._connection.send_command(
                "EVALSHA",
                script.sha,
                4,
                keys.base,
                keys.job(ack.job_id),
                keys.reserved,
                keys.stats,
                ack.job_id,
                ack.token,
                ack.result,
                ack.result_ttl,
                # redis-py's health check would PING and read the next reply,
                # which belongs to an earlier ack: skip it (a dead connection
                # shows when the replies are read, and those acks are resent).
                check_health=False,
            )
        except (redis.ConnectionError, redis.TimeoutError):
            # The replies of the acks sent before are lost with the connection.
            self._unsent += [*self.pending, ack]
            self.pending = []
            self._drop()
            return
        self.pending.append(ack)

    def collect(self) -> list[tuple[PendingAck, bool | LeaseLost | None]]:
        """Read the replies of every ack sent so far (see the class docstring)."""
        verdicts: list[tuple[PendingAck, bool | LeaseLost | None]] = []
        pending, self.pending = self.pending, []
        for index, ack in enumerate(pending):
            try:
                reply = self._connection.read_response()
            except (redis.ConnectionError, redis.TimeoutError):
                self._drop()
                verdicts += [(rest, None) for rest in pending[index:]]
                break
            except redis.ResponseError:  # NOSCRIPT, or the server refused the call
                verdicts.append((ack, None))
                continue
            if transitions.applied(reply, ack.token):
                verdicts.append((ack, True))
            else:
                verdicts.append((ack, transitions.stale_lease(ack.job_id, reply)))
        unsent, self._unsent = self._unsent, []
        return verdicts + [(ack, None) for ack in unsent]

    def close(self) -> None:
        """Give the connection back (after :meth:`collect`)."""
        if self._connection is not None:
            self.client.connection_pool.release(self._connection)
            self._connection = None

    def _drop(self) -> None:
        if self._connection is not None:
            self._connection.disconnect()
            self.client.connection_pool.release(self._connection)
            self._connection = None
