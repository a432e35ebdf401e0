"""One connection of a Redis server kept for blocking calls (``BLPOP``), and ending them.

An idle waiter (:mod:`~.idle`) blocks on each server, or cluster slot, with a
:class:`Blocker`: a connection taken from the server's pool and kept for the
waiter's life, whose ``CLIENT ID`` is read once, so that another connection
of the same server can end its ``BLPOP`` at once with ``CLIENT UNBLOCK <id>``
(a ``BLPOP`` so unblocked replies as if it timed out, taking nothing).
:meth:`Blocker.blpop_then` sends a command behind the ``BLPOP`` in the same
write, so that Redis runs it the moment the ``BLPOP`` returns.

A Redis user without ``CLIENT UNBLOCK`` (a ``-@dangerous`` ACL) cannot end the
other calls. The first refusal is logged once, as a warning, per server and
process (the worker's master checks at startup, :mod:`~django_rqueue.health`
``rqueue.W120``, and its children inherit what it found); from then on a wait
that would need it (several targets, or one that :meth:`~.idle.IdleWaiter.interrupt`
may end) blocks in slices of :data:`FALLBACK_SLICE` seconds and lets its
other calls return by themselves, sending no ``CLIENT UNBLOCK``. A job so
starts at most about 0.2 s after its wake-up (Redis ends a blocking call
only at its ~0.1 s timer ticks, ``hz 10``), and an idle waiter costs Redis
about ten ``BLPOP`` a second per server instead of one per wait.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Sequence
from typing import Any

import redis
from redis.exceptions import NoPermissionError

from ..engine.connection import MIN_BLOCK, server_name

logger = logging.getLogger("django_rqueue.worker")

#: A command's argument as redis-py packs it.
Arg = str | int | float | bytes
#: Seconds each blocking call of a wait lasts on a server that refuses ``CLIENT UNBLOCK``
#: (module docstring): Redis ends it at its next timer tick, within ~0.1-0.2 s.
FALLBACK_SLICE = 0.1

#: The servers (as :attr:`~.idle.Target.server`) whose user may not run ``CLIENT UNBLOCK``, in
#: this process: kept across a fork, so a worker's children know what its master found.
_no_unblock: set[Hashable] = set()


def unblock_refused(server: Hashable, where: str, *, report: bool = True) -> None:
    """Note that ``server`` (named ``where``, a URL without password) refuses ``CLIENT
    UNBLOCK``: waits there fall back to short blocking calls (module docstring). With
    ``report``, a warning is logged the first time, naming the consequence."""
    if server in _no_unblock:
        return
    _no_unblock.add(server)
    if report:
        logger.warning(
            "Redis at %s refused CLIENT UNBLOCK to its user: idle waits there now block "
            "in %.1f s slices, so a job may start up to about 0.2 s late (grant "
            "+client|unblock to the user in its ACL)",
            where,
            FALLBACK_SLICE,
        )


def forget_unblock_refusals() -> None:
    """Forget every :func:`unblock_refused` of this process (its waits use ``CLIENT
    UNBLOCK`` again): for tests, which reuse servers under users of different rights."""
    _no_unblock.clear()


def can_unblock(server: Hashable) -> bool:
    """Whether ``server`` has not refused ``CLIENT UNBLOCK`` (:func:`unblock_refused`)."""
    return server not in _no_unblock


class Blocker:
    """One connection of a server kept for blocking on it, with its ``CLIENT ID``."""

    def __init__(self, client: redis.Redis, server: Hashable = None) -> None:
        self.client = client
        #: The server as :attr:`~.idle.Target.server` (:func:`can_unblock`).
        self.server = server
        self.connection: Any = None
        self.client_id: int | None = None

    def blpop(self, keys: Sequence[str], seconds: float) -> list[bytes] | None:
        """``BLPOP keys seconds`` on the kept connection: ``[key, token]`` or ``None``.

        Raises redis-py's errors (the connection is closed first).
        """
        try:
            if self.connection is None:
                self._connect()
            timeout = f"{max(MIN_BLOCK, seconds):.3f}"
            self.connection.send_command("BLPOP", *keys, timeout, check_health=False)
            reply: list[bytes] | None = self.connection.read_response()
            return reply
        except BaseException:
            self.close()
            raise

    def blpop_then(
        self, keys: Sequence[str], seconds: float, command: Sequence[Arg]
    ) -> tuple[list[bytes] | None, Any]:
        """``BLPOP keys seconds`` and ``command`` in one write on the kept connection, so that
        Redis runs ``command`` the moment the ``BLPOP`` returns; ``(BLPOP's reply, command's)``.

        ``command``'s error reply (``NOSCRIPT``, ...) is returned, not raised: the
        connection is in step after it. Anything raised after the write (redis-py's
        errors, or the exception of a signal handler) closes the connection first: the
        command's reply is then lost, and the command may or may not have run.
        """
        try:
            if self.connection is None:
                self._connect()
            timeout = f"{max(MIN_BLOCK, seconds):.3f}"
            packed = self.connection.pack_commands([("BLPOP", *keys, timeout), tuple(command)])
            self.connection.send_packed_command(packed, check_health=False)
            popped: list[bytes] | None = self.connection.read_response()
            try:
                reply = self.connection.read_response()
            except redis.ResponseError as error:  # an error reply: the connection is in step
                reply = error
            return popped, reply
        except BaseException:
            self.close()
            raise

    def _connect(self) -> None:
        self.connection = self.client.connection_pool.get_connection()
        self.connection.send_command("CLIENT", "ID")
        self.client_id = int(self.connection.read_response())

    def unblock(self) -> None:
        """End a blocked ``BLPOP`` from another connection of the server (errors ignored).

        Sends nothing to a server that refused it before; a first refusal is noted
        (:func:`unblock_refused`).
        """
        if self.client_id is None or not can_unblock(self.server):
            return
        try:
            self.client.client_unblock(self.client_id)
        except NoPermissionError:
            unblock_refused(self.server, server_name(self.client))
        except redis.RedisError:
            pass

    def close(self) -> None:
        """Drop the kept connection (out of step, or no longer wanted)."""
        connection, self.connection, self.client_id = self.connection, None, None
        if connection is not None:
            connection.disconnect()
            self.client.connection_pool.release(connection)
