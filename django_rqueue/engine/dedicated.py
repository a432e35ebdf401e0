"""Script calls on a dedicated connection per thread, outside redis-py's connection pool.

redis-py's generic command path (``Redis.execute_command``) takes a
connection from the pool and gives it back around every command. In
redis-py 8 that is a lock, a ``poll()`` of the socket for unread data and
four updates of its connection-count observability, each time: measured on
this project's bench host, about 30 µs of a 140 µs ``EVALSHA`` round trip
(``bench/README.md``). Huey and the other peers that enqueue with a
plain ``LPUSH`` pay it too; an enqueue that must stay one script call cannot
afford it beside them.

:func:`execute` sends a command on a connection that the calling thread
keeps for itself, one per connection pool: made by the pool's own connection
class with the pool's own options (so Sentinel's master discovery, TLS,
credentials, the health check every 15 s and the client's :class:`~redis.retry.Retry` all
apply unchanged), and never handed to another thread. A connection or timeout
error disconnects it and the command is sent again under that retry policy,
as ``execute_command`` does; a connection error on a connection used before
(the server closed it while this thread was idle: what the pool's ``poll()``
finds) is also answered by one more send on a new connection, whatever the
policy. Every script django-rqueue sends this way is safe to resend: each is
idempotent by job id, request id or fencing token.
A process that forked makes a new connection at its first call (the parent's
socket is left alone). A thread's connections close when the thread ends or
the client's pool is garbage collected.

Clients without a plain pool fall back to ``execute_command``: a Redis
Cluster client (its nodes are chosen per slot), a pool with redis-py's
client-side cache. So does everything that is not a single script call
(pipelines, ``WAIT``, blocking pops), which keeps using redis-py's API.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from typing import Any

import redis
from redis.connection import AbstractConnection, ConnectionPool

hiredis_pack_command: Callable[..., Any] | None
try:  # the optional C parser (the "hiredis" extra); redis-py's packer otherwise
    from hiredis import pack_command as hiredis_pack_command
except ImportError:  # pragma: no cover - the test environments install it
    hiredis_pack_command = None


class _Dedicated:
    """One thread's connection to one pool's server, and how its commands are packed."""

    def __init__(self, pool: ConnectionPool) -> None:
        self.connection: AbstractConnection = pool.connection_class(**pool.connection_kwargs)
        self.pid = os.getpid()
        #: Whether :attr:`connection` may hold a socket; ``False`` until the first connect
        #: and after each failure (redis-py's ``connect()`` costs a retry wrapper even
        #: when connected: about 4 % of a ``.delay()``).
        self.connected = False
        self.pack = packer(self.connection)

    def execute(
        self, args: tuple[str | int | float, ...], meanwhile: Callable[[], object] | None = None
    ) -> Any:  # a Redis reply
        packed = self.pack(*args)
        if not self.connected:
            self._connect()
            return self._send(packed, meanwhile)
        try:
            return self._send(packed, meanwhile)
        except redis.ConnectionError:
            # The socket may have been closed by the server while this thread did not use
            # it (a restart, its idle timeout). redis-py's pool checks for that before it
            # lends a connection (a poll() per command); here the command is sent once more
            # on a new connection, whatever the client's retry policy (django-redis's
            # clients retry nothing). Resending is safe: see the module docstring.
            self._connect()
            return self._send(packed)

    def _connect(self) -> None:
        """Connect (with the connection's own retries) outside the resend loop, as the pool
        does in ``execute_command``: an unreachable Redis fails within one connect's retries
        instead of one per resend."""
        self.connection.connect()  # type: ignore[no-untyped-call]
        self.connected = True

    def _send(
        self, packed: list[bytes], meanwhile: Callable[[], object] | None = None
    ) -> Any:  # a Redis reply
        connection = self.connection
        pending = meanwhile

        def send() -> Any:  # a Redis reply
            nonlocal pending
            connection.send_packed_command(packed)  # type: ignore[no-untyped-call]
            if pending is not None:  # once, after the first send that went out
                run, pending = pending, None
                try:
                    run()
                except BaseException:
                    failed(None)  # its reply is still owed: the connection is out of step
                    raise
            return connection.read_response()

        def failed(_error: BaseException | None) -> None:
            self.connected = False
            connection.disconnect()  # type: ignore[no-untyped-call]

        return connection.retry.call_with_retry(send, failed)


def packer(connection: AbstractConnection) -> Callable[..., list[bytes]]:
    """How to pack commands sent on ``connection`` (``pack(*args)`` → the bytes to send).

    With hiredis installed: its ``pack_command``, which makes the bytes redis-py's
    own packer makes then (redis-py hands str, bytes, int and float to the same
    function) without redis-py's per-argument type checks: 15 % of a ``.delay()``
    in the bench. Otherwise the connection's own ``pack_command``.
    """
    if hiredis_pack_command is not None:
        return _hiredis_pack
    return connection.pack_command


def _hiredis_pack(*args: str | int | float) -> list[bytes]:
    assert hiredis_pack_command is not None  # noqa: S101 - chosen only when it is installed
    return [hiredis_pack_command(args)]


class _Connections(threading.local):
    """This thread's dedicated connections, by the pool whose options they copy."""

    def __init__(self) -> None:
        self.by_pool: weakref.WeakKeyDictionary[ConnectionPool, _Dedicated] = (
            weakref.WeakKeyDictionary()
        )
        #: The pool used last and its connection, both weakly (the connection lives as long
        #: as its pool's entry above): a thread mostly uses one pool, and finding it here
        #: skips the checks and the weak-key lookup below.
        self.last: tuple[weakref.ref[ConnectionPool], weakref.ref[_Dedicated]] | None = None


_local = _Connections()


def _dedicated(client: redis.Redis) -> _Dedicated | None:
    """This thread's connection for ``client``'s pool (made on first use, and again after a
    fork); ``None`` when the client has no plain connection pool."""
    pool = getattr(client, "connection_pool", None)
    last = _local.last
    if last is not None and pool is not None and last[0]() is pool:
        found = last[1]()
        if found is not None and found.pid == os.getpid():
            return found
    if not isinstance(pool, ConnectionPool) or getattr(pool, "cache", None) is not None:
        return None
    dedicated = _local.by_pool.get(pool)
    if dedicated is None or dedicated.pid != os.getpid():
        dedicated = _local.by_pool[pool] = _Dedicated(pool)
    _local.last = (weakref.ref(pool), weakref.ref(dedicated))
    return dedicated


def execute(
    client: redis.Redis, *args: str | int | float, meanwhile: Callable[[], object] | None = None
) -> Any:  # a Redis reply
    """Send the command ``args`` on this thread's dedicated connection and return its reply.

    ``meanwhile``: called once, after the command is sent and before its reply
    is read, so that work that does not need the reply overlaps Redis's (a
    ``.delay()`` builds its Job then). Also on the fallback path,
    before the command. What it raises propagates (the connection is dropped:
    its reply is still owed); the command may have run.

    The reply is the raw one, without redis-py's per-command response callbacks:
    use it for ``EVALSHA`` (which has none). Raises what ``client.execute_command``
    raises: ``redis.ResponseError`` (``NoScriptError`` among them) for an error reply,
    ``redis.ConnectionError`` / ``redis.TimeoutError`` once the client's retries are spent.
    """
    dedicated = _dedicated(client)
    if dedicated is None:
        if meanwhile is not None:
            meanwhile()
        return client.execute_command(*args)  # type: ignore[no-untyped-call]
    return dedicated.execute(args, meanwhile)
