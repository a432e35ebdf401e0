"""Script calls sent now and read later, on one connection (Redis pipelining).

Redis answers the commands of one connection in order, so a client may send
call ``k + 1`` before it reads the reply of call ``k``
(https://redis.io/docs/latest/develop/use/pipelining/). redis-py's
``Pipeline`` reads every reply at ``execute()``; django-rqueue needs the
replies later, one at a time, so :class:`InFlight` holds one connection of a
client's pool and does the sending and reading itself. Two users:

- :func:`pipelined`: ``delay_many`` writes its batches (``enqueue_batch.lua``)
  two deep, so that Python encodes batch ``k + 1`` while Redis writes batch
  ``k``.
- :class:`AckStream`: a worker that reserved a batch of jobs sends each job's
  ack the moment the job returns and reads the replies when it next waits
  for Redis anyway. Redis applies each ack as soon as its bytes arrive, so a
  worker killed after the send has not lost the ack; only the worker learning
  that an ack was refused (stale fencing token) is deferred.

With ``REDIS_CLUSTER`` the connection is one to the master of the calls' slot
(all calls on one :class:`InFlight` are of one queue, one hash tag). A
``MOVED``/``ASK``/``TRYAGAIN``/``CLUSTERDOWN`` reply (the slot is moving or
the cluster is failing over) is a reply unknown: the call is made again
synchronously by the cluster client, which follows the redirection, and the
connection is dropped, so the next call asks the client's updated slot map
for its node.

Only for scripts that are idempotent per call, as ``enqueue_batch.lua`` (a
resent batch reports its jobs as ``exists``) and ``ack.lua`` (a resent ack
reads as applied) are: a call whose reply is unknown (the connection broke,
or Redis answered ``NOSCRIPT`` after losing its script cache) is made again
synchronously with :class:`~.scripts.LuaScript`, which has redis-py's retries
and loads the script when it is missing.
"""

from __future__ import annotations

import weakref
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import redis
from redis.exceptions import (
    NoScriptError,
    RedisClusterException,
)

from ..exceptions import LeaseLost
from . import calls, replies
from .calls import Arg
from .dedicated import packer
from .errors import REDIRECTED
from .keys import QueueKeys
from .replies import Reply
from .scripts import LuaScript, load
from .servers import as_cluster

#: ``(KEYS, ARGV)`` of one script call.
Call = tuple[list[str], list[Arg]]
#: Calls in flight at once: two is enough to overlap one encoder with one Redis.
DEPTH = 2


class InFlight:
    """One connection of ``client``'s pool for calls whose replies are read later.

    With a cluster client, one connection of the pool of the master that serves
    the first call's keys (every call on it must be of that slot).
    The connection is taken at the first :meth:`send` and given back by
    :meth:`release` (when no reply is owed) or :meth:`drop` (when the
    connection is out of step: it is closed first).
    """

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        #: The connection taken at the first :meth:`send`; ``None`` before it and after
        #: :meth:`release` or :meth:`drop`.
        self.connection: Any = None
        #: The pool :attr:`connection` came from (a cluster node's, or the client's).
        self.pool: Any = None
        #: Connections dropped so far: a reply owed on an earlier one is lost, and the
        #: connection taken since must not be read for it.
        self.generation = 0

    def send(self, script: LuaScript, keys: list[str], args: list[Arg]) -> bool:
        """Send a call of ``script`` (``EVALSHA``); ``False`` when the connection dropped, or
        a cluster's slot map has no master for the call's slot."""
        try:
            if self.connection is None:
                self.pool = self._pool(keys[0])
                self.connection = self.pool.get_connection()
            self.connection.send_packed_command(
                packer(self.connection)("EVALSHA", script.sha, len(keys), *keys, *args),
                # redis-py's health check would PING and read the next reply,
                # which belongs to an earlier call: skip it (a dead connection
                # shows when the replies are read, and those calls are resent).
                check_health=False,
            )
        except (redis.ConnectionError, redis.TimeoutError, RedisClusterException):
            # Lost, or (a cluster) no master serves the slot for now: the call is made
            # again through the client, which waits for the cluster or says it is down.
            self.drop()
            return False
        return True

    def _pool(self, key: str) -> Any:  # a redis.ConnectionPool
        """The pool of the client, or of the cluster master that serves ``key`` now."""
        cluster = as_cluster(self.client)
        if cluster is None:
            return self.client.connection_pool
        node = cluster.get_node_from_key(key)  # type: ignore[no-untyped-call]
        return cluster.get_redis_connection(node).connection_pool

    def read(self) -> Reply:
        """Read the next reply owed (redis-py's exceptions propagate; the caller drops)."""
        reply: Reply = self.connection.read_response()
        return reply

    @property
    def connected(self) -> bool:
        return self.connection is not None

    def drop(self) -> None:
        """Close the connection and give it back: every reply still owed on it is lost."""
        if self.connection is not None:
            self.connection.disconnect()
            self.pool.release(self.connection)
            self.connection = None
            self.generation += 1

    def release(self) -> None:
        """Give the connection back (only when no reply is owed on it)."""
        if self.connection is not None:
            self.pool.release(self.connection)
            self.connection = None


def pipelined(
    client: redis.Redis, script: LuaScript, calls: Iterable[Call], depth: int = DEPTH
) -> Iterator[Reply]:
    """Yield the reply of each call in ``calls``, in order, keeping up to ``depth`` in flight.

    ``calls`` is consumed lazily: the next call is built (and sent) while
    Redis runs the ones before it. An error reply of the script itself is
    raised as redis-py raises it (``redis.ResponseError``); connection and
    timeout errors of the synchronous resend propagate as redis-py raises them.
    """
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth!r}")
    wire = InFlight(client)
    #: Calls sent and not read yet, each with the generation of the connection it went
    #: out on (``None``: the send failed).
    in_flight: deque[tuple[Call, int | None]] = deque()

    def send(call: Call) -> int | None:
        return wire.generation if wire.send(script, *call) else None

    def read_one() -> Reply:
        call, sent_on = in_flight.popleft()
        if sent_on == wire.generation and wire.connected:
            try:
                return wire.read()
            except NoScriptError:
                pass  # Redis lost its script cache: the resend below loads it
            except (redis.ConnectionError, redis.TimeoutError, *REDIRECTED):
                # Lost, or (a cluster's slot moved) sent to the wrong node, as every call
                # still owed on it: resend those too, through the client.
                wire.drop()
        return script(client, *call)

    try:
        for call in calls:
            in_flight.append((call, send(call)))
            while len(in_flight) >= depth:
                yield read_one()
        while in_flight:
            yield read_one()
    finally:
        if in_flight:
            wire.drop()  # replies still owed: the connection is out of step
        else:
            wire.release()


@dataclass(frozen=True)
class PendingAck:
    """An ack sent on an :class:`AckStream` whose reply is not read yet."""

    queue: str
    keys: QueueKeys
    job_id: str
    token: int
    result: str
    result_ttl: int

    def call(self) -> Call:
        """``ack.lua``'s ``(KEYS, ARGV)`` for this ack."""
        call = calls.ack(self.keys, self.job_id, self.token, self.result, self.result_ttl)
        return call.keys, call.args


#: The clients whose servers this process loaded ``ack.lua`` into before an
#: :class:`AckStream` first sent on them (a server that loses its scripts later, restarted or
#: ``SCRIPT FLUSH``, answers ``NOSCRIPT``: verdict ``False``, and the resend loads it again).
_ACK_LOADED: weakref.WeakSet[redis.Redis] = weakref.WeakSet()


class AckStream:
    """Acks written to one connection of ``client``'s pool without waiting for the replies.

    ``send`` writes an ``EVALSHA ack`` and returns at once; ``collect`` reads
    every reply still owed, in order, and returns ``(ack, verdict)`` pairs:
    verdict ``True`` (applied), a :class:`~django_rqueue.exceptions.LeaseLost`
    (stale token: nothing changed), ``False`` (not run: the server did not have
    the script, ``NOSCRIPT``, after a restart or ``SCRIPT FLUSH``; resend it
    synchronously, which loads it) or ``None`` (reply unknown: resend it
    synchronously). ``close`` gives the connection back to the pool.

    The first stream of a process on a client loads the script first (one
    ``SCRIPT EXISTS``, and a ``SCRIPT LOAD`` when it is missing), so that a
    fresh Redis does not answer a whole batch of acks with ``NOSCRIPT``.
    """

    def __init__(self, client: redis.Redis) -> None:
        self.wire = InFlight(client)
        self.pending: list[PendingAck] = []
        #: Acks whose send failed: their verdict is None.
        self._unsent: list[PendingAck] = []
        if client not in _ACK_LOADED:
            try:
                load("ack").ensure_loaded(client)
            except (redis.RedisError, RedisClusterException):
                pass  # unreachable or refused: the sends find out, NOSCRIPT is resent
            else:
                _ACK_LOADED.add(client)

    @property
    def owed(self) -> bool:
        """Whether :meth:`collect` has verdicts to return."""
        return bool(self.pending or self._unsent)

    def send(self, ack: PendingAck) -> None:
        """Write ``ack`` to Redis without waiting for the reply."""
        if self.wire.send(load("ack"), *ack.call()):
            self.pending.append(ack)
        else:  # the replies of the acks sent before are lost with the connection
            self._unsent += [*self.pending, ack]
            self.pending = []

    def collect(self) -> list[tuple[PendingAck, bool | LeaseLost | None]]:
        """Read the replies of every ack sent so far (see the class docstring)."""
        verdicts: list[tuple[PendingAck, bool | LeaseLost | None]] = []
        pending, self.pending = self.pending, []
        for index, ack in enumerate(pending):
            try:
                reply = self.wire.read()
            except (redis.ConnectionError, redis.TimeoutError, *REDIRECTED):
                # Lost, or (a cluster's slot moved) sent to the wrong node, as every ack
                # still owed on it: resent by the caller, through the client.
                self.wire.drop()
                verdicts += [(rest, None) for rest in pending[index:]]
                break
            except NoScriptError:  # the script was not there: nothing ran
                verdicts.append((ack, False))
                continue
            except redis.ResponseError:  # the server refused the call
                verdicts.append((ack, None))
                continue
            if replies.applied(reply, ack.token):
                verdicts.append((ack, True))
            else:
                verdicts.append((ack, replies.stale_lease(ack.job_id, reply)))
        unsent, self._unsent = self._unsent, []
        return verdicts + [(ack, None) for ack in unsent]

    def close(self) -> None:
        """Give the connection back (after :meth:`collect`)."""
        self.wire.release()
