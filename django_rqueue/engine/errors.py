"""How redis-py's errors are classified: outages, refused credentials and ACLs, a moving slot.

:func:`redis_errors` turns redis-py's exceptions into django-rqueue's
:class:`~django_rqueue.exceptions.RedisUnavailable` family, so that every
caller retries an outage, a failover and a reshard the same way.
"""

from __future__ import annotations

import os
import ssl
import types
from contextlib import AbstractContextManager
from typing import Literal

import redis
import redis.asyncio
from redis.exceptions import (
    AskError,
    ClusterDownError,
    ClusterError,
    NoPermissionError,
    RedisClusterException,
    SlotNotCoveredError,
    TryAgainError,
)

from ..conf import get_config
from ..exceptions import (
    RedisAuthenticationFailed,
    RedisPermissionDenied,
    RedisUnavailable,
    SlotMoving,
)
from .servers import server_name

#: The start of the error a master that is being demoted to a replica sends its blocked
#: clients (Redis 7: "UNBLOCKED force unblock from blocking operation, instance state
#: changed (master -> replica?)"). The connection's next write gets ``READONLY``, which
#: redis-py's Sentinel connections turn into a reconnection to the new master.
DEMOTED = "UNBLOCKED"


#: A Redis Cluster's replies while a slot moves or a master fails over, and redis-py's
#: cluster client giving up on them: the command did not run, and runs once the slot has
#: settled. ``TRYAGAIN`` (a script whose keys are split between the two masters of a moving
#: slot: every script of django-rqueue names the queue's base key, which no command
#: creates, so each gets it until the slot's last key has moved), ``ASK``/``MOVED``
#: (:class:`~redis.exceptions.MovedError` is an ``AskError``) read outside the cluster
#: client's own redirection, ``ClusterError: TTL exhausted`` (the cluster client's 16
#: tries, about 0.4 s, all redirected or refused; ``CLUSTERDOWN``'s
#: :class:`~redis.exceptions.ClusterDownError` is a ``ClusterError`` too), and
#: :class:`~redis.exceptions.RedisClusterException`, which redis-py raises when it cannot
#: read the slot map again (the nodes disagree mid-reshard, no node answers, a slot has
#: no master: ``SlotNotCoveredError``), and also for a command it cannot route, which
#: django-rqueue does not send.
CLUSTER_IN_FLUX = (TryAgainError, AskError, ClusterError, RedisClusterException)
#: Those of :data:`CLUSTER_IN_FLUX` that concern one slot (:class:`SlotMoving`); the others
#: (the slot map cannot be read) concern the whole cluster.
SLOT_IN_FLUX = (TryAgainError, AskError, ClusterError, SlotNotCoveredError)
#: Replies of a cluster whose slot moves or fails over, read on a raw connection to one of
#: its masters (``MOVED`` is an ``AskError`` too): the command did not run there; resent
#: through the cluster client, it follows them (pipelined calls), or the wait it was ends
#: as a wake-up (the idle ``BLPOP``).
REDIRECTED = (AskError, TryAgainError, ClusterDownError)


class _RedisErrors:
    """The context manager of :func:`redis_errors`: a class, as a generator-based one costs
    a generator and three calls per use, on the path of every script call."""

    __slots__ = ("client",)

    def __init__(self, client: redis.Redis | redis.asyncio.Redis | None = None) -> None:
        self.client = client

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: types.TracebackType | None,
    ) -> Literal[False]:
        if exc is None:
            return False
        found = unavailable(exc, self.client)
        if found is not None:
            raise found from exc
        return False


def certificate_refused(exc: BaseException) -> ssl.SSLCertVerificationError | None:
    """The TLS certificate verification failure behind redis-py's ``exc`` (a
    ``ConnectionError`` whose context is Python's ``ssl.SSLCertVerificationError``:
    an unknown CA, a name or IP not in the certificate, an expired certificate), or
    ``None``. A configuration error, not an outage: retrying cannot help."""
    seen: BaseException | None = exc
    for _ in range(8):  # a cause chain is short; never loop on a cyclic one
        if seen is None:
            return None
        if isinstance(seen, ssl.SSLCertVerificationError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


#: What to do about a refused certificate (Python 3.13 also refuses a CA without keyUsage).
CERTIFICATE_HINT = (
    "Give the server's CA in the URL (rediss://host:port/0?ssl_ca_certs=/path/ca.crt), "
    "and check that the certificate names the host or IP of the URL and has not expired."
)


def unavailable(
    exc: BaseException, client: redis.Redis | redis.asyncio.Redis | None = None
) -> RedisUnavailable | None:
    """The :class:`RedisUnavailable` (or :class:`RedisAuthenticationFailed`) that redis-py's
    ``exc`` amounts to, naming ``client``'s server when given; ``None`` for any other error
    (see :func:`redis_errors`)."""
    where = "Redis" if client is None else f"Redis at {server_name(client)}"
    if isinstance(exc, redis.AuthenticationError):
        return RedisAuthenticationFailed(
            f"{where} rejected the credentials ({exc}): fix the user/password in the "
            "Redis URL (redis://user:password@host:port/db)"
        )
    if isinstance(exc, redis.ConnectionError | redis.TimeoutError | ClusterDownError):
        refused = certificate_refused(exc)
        if refused is not None:
            return RedisUnavailable(
                f"{where} is unreachable: its TLS certificate was refused "
                f"({refused.verify_message}). {CERTIFICATE_HINT}"
            )
        return RedisUnavailable(f"{where} is unreachable: {exc}")
    if isinstance(exc, AttributeError | TypeError) and wrote_to_a_closed_connection(exc):
        return RedisUnavailable(
            f"{where} is unreachable: the server or something on the way closed the "
            f"connection ({type(exc).__name__}: {exc})"
        )
    if isinstance(exc, NoPermissionError):
        return RedisPermissionDenied(
            f"{where} refused a command to the Redis user ({exc}): give the user the ACL "
            f"rules django-rqueue needs, with the key pattern ~{get_config().key_prefix}:*"
        )
    if isinstance(exc, CLUSTER_IN_FLUX):
        kind = SlotMoving if isinstance(exc, SLOT_IN_FLUX) else RedisUnavailable
        return kind(
            f"{where}: a slot is moving between masters or failing over "
            f"({type(exc).__name__}: {exc}); the command did not run"
        )
    if isinstance(exc, redis.ResponseError) and str(exc).startswith(DEMOTED):
        return RedisUnavailable(f"{where}: the master was demoted: {exc}")
    return None


#: Where redis-py's asyncio client writes a command (the frame names, and its file).
_ASYNC_WRITES = frozenset({"send_packed_command", "_send_packed_command"})
_ASYNC_CONNECTION = os.path.join("redis", "asyncio", "connection.py")
_ASYNCIO = os.sep + "asyncio" + os.sep


def wrote_to_a_closed_connection(exc: BaseException) -> bool:
    """Whether ``exc`` is what asyncio's socket transport raises when redis-py's asyncio
    client writes to a pooled connection the peer closed while it was idle: a
    ``TypeError`` on Python 3.12 and 3.14.0, an ``AttributeError`` on 3.13.0 to 3.13.9
    (CPython gh-136234, fixed in 3.13.10 and 3.14.1; redis-py issue #4287). It is not a
    ``redis.ConnectionError``, so redis-py does not retry it, but it has dropped that
    connection: the command was not sent, and the next one opens a new connection.

    Told by where it was raised (inside asyncio, under redis-py's write), not by its
    message, which differs between Python versions.
    """
    frame = exc.__traceback__
    writing, innermost = False, ""
    while frame is not None:
        code = frame.tb_frame.f_code
        if code.co_name in _ASYNC_WRITES and code.co_filename.endswith(_ASYNC_CONNECTION):
            writing = True
        innermost = code.co_filename
        frame = frame.tb_next
    return writing and _ASYNCIO in innermost


_REDIS_ERRORS = _RedisErrors()


def redis_errors(
    client: redis.Redis | redis.asyncio.Redis | None = None,
) -> AbstractContextManager[None]:
    """Turn redis-py's connection and timeout errors into :class:`RedisUnavailable`, a
    refused user or password into :class:`RedisAuthenticationFailed`, and a command or
    key the user's ACL refuses (``NOPERM``) into :class:`RedisPermissionDenied`.

    So is the error of a blocking command cut short because its master was
    demoted (:data:`DEMOTED`): the master is moving, as during a failover; and
    a Redis Cluster's ``CLUSTERDOWN`` (a slot has no master until a replica is
    promoted), and the other replies of a cluster whose slot is moving
    (:data:`CLUSTER_IN_FLUX`: ``TRYAGAIN``, ``ASK``/``MOVED``, ``TTL exhausted``):
    transient, so that every caller that retries an unreachable Redis with
    its backoff also waits out a reshard. So is asyncio's own error from a write
    to a connection the peer reset (:func:`wrote_to_a_closed_connection`). With
    ``client``, the message names its server (:func:`server_name`).
    """
    return _REDIS_ERRORS if client is None else _RedisErrors(client)


def wrong_type(error: object) -> bool:
    """Whether ``error`` (an exception, or a pipeline's reply) is Redis's ``WRONGTYPE``: a
    key holds another type than the command reads (corrupt data, written by hand)."""
    return isinstance(error, redis.ResponseError) and str(error).startswith("WRONGTYPE")
