"""The parsed ``RQUEUE`` setting: :class:`Config`, :class:`QueueConfig` and :class:`RateLimit`.

Plain frozen values, built by :func:`django_rqueue.conf.parse.parse` from a setting that
:func:`django_rqueue.conf.validation.problems` found no error in.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..periodic.entries import ScheduleEntry
from . import defaults

#: Units of a ``rate_limit`` (``"<count>/<unit>"``), in seconds.
RATE_UNITS: Mapping[str, int] = {"s": 1, "m": 60, "h": 3600}
RATE_LIMIT_RE = re.compile(r"^([1-9][0-9]{0,8})/([smh])$")
#: Milliseconds of GCRA tolerance of every rate limit: a worker up to this late for a
#: slot still gets it, and after an idle spell this much worth of jobs (at least one)
#: may go at once. See :class:`RateLimit`.
RATE_TOLERANCE_MS = 50


@dataclass(frozen=True)
class RateLimit:
    """A queue's ``rate_limit``: at most :attr:`count` jobs per :attr:`per_seconds`.

    Enforced by every reserving script on the Redis clock with GCRA (the
    Generic Cell Rate Algorithm of ATM networks, ATM Forum *Traffic
    Management 4.0*, in its "virtual scheduling" form; see
    ``engine/scripts/include/rate_allowance.lua``): jobs are handed out
    :attr:`interval_ms` apart, whichever worker asks, with a tolerance of
    :attr:`tolerance_ms`, so that at most :attr:`burst` jobs go at once after
    an idle spell and any window of ``w`` seconds holds at most
    ``count / per_seconds * (w + tolerance) + 1`` jobs.
    """

    #: Jobs per period, >= 1.
    count: int
    #: The period in seconds (1, 60 or 3600: ``s``, ``m``, ``h``).
    per_seconds: int

    @classmethod
    def parse(cls, value: object) -> RateLimit:
        """Parse ``"<count>/<unit>"`` (``"100/s"``, ``"6000/m"``, ``"1000/h"``).

        Raises:
            ValueError: ``value`` is not a string of that shape with a count >= 1.
        """
        match = RATE_LIMIT_RE.match(value) if isinstance(value, str) else None
        if match is None:
            raise ValueError(
                f"a rate limit is a string '<count>/<s|m|h>' with a count >= 1, such as "
                f"'100/s', '6000/m' or '1000/h'; got {value!r}"
            )
        return cls(int(match.group(1)), RATE_UNITS[match.group(2)])

    @property
    def interval_ms(self) -> float:
        """Milliseconds between two jobs (GCRA's emission interval)."""
        return self.per_seconds * 1000 / self.count

    @property
    def tolerance_ms(self) -> float:
        """How late (ms) a worker may be for a slot and still get it: :data:`RATE_TOLERANCE_MS`."""
        return RATE_TOLERANCE_MS

    @property
    def burst(self) -> int:
        """Jobs that may go at once after an idle spell: ``tolerance // interval + 1``."""
        return int(self.tolerance_ms / self.interval_ms + 1e-9) + 1

    def __str__(self) -> str:
        unit = next(u for u, seconds in RATE_UNITS.items() if seconds == self.per_seconds)
        return f"{self.count}/{unit}"


@dataclass(frozen=True)
class QueueConfig:
    """Resolved options of one declared queue (``DEFAULTS`` merged with ``QUEUES[name]``)."""

    name: str
    #: Redis URL of this queue, or ``None`` to use the global connection.
    redis_url: str | None
    #: Hard limit of one attempt, in seconds.
    timeout: float
    max_attempts: int
    #: ``"exponential"`` or a callable ``(attempt, exception) -> seconds | None``.
    backoff: str | Callable[[int, BaseException], float | None]
    #: Seconds a finished job's record (and result) is kept.
    result_ttl: int
    #: Seconds a failed job stays in the failed store before it is deleted (``None``: forever).
    failed_ttl: int | None
    #: Failed jobs the store keeps at most, the oldest deleted first (``None``: no cap).
    failed_max: int | None
    #: At most this many jobs of one group run at once, across all workers (``None``:
    #: no cap). Jobs without a group form the default group, which is capped too.
    group_concurrency: int | None = None
    #: ``rate_limit``: how fast the queue hands out jobs to all workers together
    #: (``None``: as fast as they take them).
    rate_limit: RateLimit | None = None


@dataclass(frozen=True)
class Config:
    """The parsed ``RQUEUE`` setting."""

    redis_url: str | None
    cache_alias: str | None
    key_prefix: str
    default_queue: str
    queues: Mapping[str, QueueConfig]
    #: Lease length in seconds; a running job's lease is renewed every third of it.
    lease: float
    #: Seconds between the soft and the hard timeout.
    timeout_grace: float
    eager: bool
    eager_propagate: bool
    #: Async jobs a worker child runs at once on its event loop.
    async_concurrency: int
    #: ``RQUEUE["SCHEDULE"]``: periodic entries by name (:mod:`django_rqueue.periodic.entries`).
    schedule: Mapping[str, ScheduleEntry]
    #: ``RQUEUE["SENTINELS"]``: ``(host, port)`` of every Redis Sentinel; empty without Sentinel.
    #: Every ``REDIS_URL`` then names a monitored master: ``redis://<service name>/<db>``.
    sentinels: tuple[tuple[str, int], ...]
    #: ``RQUEUE["SENTINEL_KWARGS"]``: options of the connections to the sentinels themselves.
    sentinel_kwargs: Mapping[str, Any]
    #: ``RQUEUE["MIN_REPLICAS_ACK"]``: replicas that must have an enqueued job before
    #: ``.delay()`` returns (``WAIT``); 0: do not wait.
    min_replicas_ack: int
    #: ``RQUEUE["MIN_REPLICAS_TIMEOUT"]``: seconds ``.delay()`` waits for them at most.
    min_replicas_timeout: float
    #: ``RQUEUE["REDIS_CLUSTER"]``: every ``REDIS_URL`` names a node of a Redis Cluster, and
    #: the clients are redis-py's cluster clients (:mod:`django_rqueue.engine.connection`).
    redis_cluster: bool = False
    #: ``RQUEUE["MAX_PAYLOAD_BYTES"]``: the largest JSON of a job's arguments, in bytes;
    #: ``None``: no limit but the 64 MiB a worker decodes (:data:`.defaults.MAX_JSON_BYTES`).
    max_payload_bytes: int | None = defaults.MAX_PAYLOAD_BYTES
    #: ``RQUEUE["TASK_MODULES"]``: modules (and their submodules) outside the installed apps
    #: whose ``django.tasks`` tasks a worker may import.
    task_modules: tuple[str, ...] = ()
    #: ``RQUEUE["ENCRYPTION_KEYS"]``: Fernet keys (URL-safe base64 text), the first one
    #: encrypting; empty: job data is stored plain (:mod:`django_rqueue.encryption`).
    encryption_keys: tuple[str, ...] = ()
    #: ``RQUEUE["WORKFLOW_DEPENDENCY_TIMEOUT"]``: seconds a dependent waits for its inputs at
    #: most, from its creation (Redis clock); ``None``: no limit.
    workflow_dependency_timeout: float | None = defaults.WORKFLOW_DEPENDENCY_TIMEOUT
    #: ``RQUEUE["WORKFLOW_FORCE_OUTBOX"]``: every edge through the outbox and every workflow
    #: created in steps (a testing aid for the cross-slot path on one Redis).
    workflow_force_outbox: bool = defaults.WORKFLOW_FORCE_OUTBOX
    #: ``RQUEUE["MIDDLEWARE"]``: dotted paths of the job middleware classes, in order
    #: (:mod:`django_rqueue.middleware`); empty: none.
    middleware: tuple[str, ...] = ()

    def queues_named(self, names: Iterable[str]) -> list[str]:
        """Return ``names`` as a list once each is checked to be declared (``ValueError``)."""
        checked = list(names)
        for name in checked:
            self.queue(name)
        return checked

    def queue(self, name: str) -> QueueConfig:
        """Return the declared queue ``name``; raise ``ValueError`` if it is not declared."""
        try:
            return self.queues[name]
        except KeyError:
            declared = ", ".join(sorted(self.queues))
            raise ValueError(
                f"queue {name!r} is not declared in RQUEUE['QUEUES'] (declared: {declared})"
            ) from None
