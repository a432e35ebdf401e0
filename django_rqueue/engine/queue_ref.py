"""The queue handle: what every per-queue operation derives from a queue's name.

:func:`queue_ref` returns a :class:`QueueRef` of a declared queue: its key names
(:class:`~.keys.QueueKeys`), its resolved options (:class:`~django_rqueue.conf.QueueConfig`),
the lease in milliseconds, and its Redis clients. A ref is made from the ``RQUEUE``
setting as it is at the call and cached per parsed setting (the parsed
:class:`~django_rqueue.conf.Config` is rebuilt when Django's ``setting_changed``
says ``RQUEUE`` changed, so a cached ref never outlives the setting it was made from).
"""

from __future__ import annotations

from dataclasses import dataclass

import redis
import redis.asyncio

from ..conf import Config, QueueConfig, get_config
from .connection import get_async_client, get_client
from .keys import QueueKeys


@dataclass(frozen=True)
class QueueRef:
    """One declared queue: ``name``, its ``keys``, its ``config`` and ``lease_ms``
    (``RQUEUE["LEASE"]`` in whole milliseconds, as the scripts take it)."""

    name: str
    keys: QueueKeys
    config: QueueConfig
    lease_ms: int

    def client(self) -> redis.Redis:
        """The queue's Redis client (:func:`~.connection.get_client`; cached there).

        Raises:
            RedisUnavailable: as :func:`~.connection.get_client`.
        """
        return get_client(self.name)

    def async_client(self) -> redis.asyncio.Redis | None:
        """The queue's asyncio client for the running event loop, ``None`` with
        ``CACHE_ALIAS`` (:func:`~.connection.get_async_client`)."""
        return get_async_client(self.name)


#: Queue name -> (the parsed setting the ref was made from, the ref).
_refs: dict[str, tuple[Config, QueueRef]] = {}


def queue_ref(name: str) -> QueueRef:
    """Return the handle of the declared queue ``name``.

    Raises:
        ValueError: ``name`` is not declared in ``RQUEUE["QUEUES"]``.
        django.core.exceptions.ImproperlyConfigured: ``RQUEUE`` is invalid.
    """
    config = get_config()
    known = _refs.get(name)
    if known is not None and known[0] is config:
        return known[1]
    ref = QueueRef(
        name=name,
        keys=QueueKeys.of(config.key_prefix, name),
        config=config.queue(name),
        lease_ms=int(config.lease * 1000),
    )
    _refs[name] = (config, ref)
    return ref
