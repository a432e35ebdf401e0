"""The ``RQUEUE`` setting: defaults, validation and per-queue resolution.

Settings are read at call time: :func:`get_config` parses ``settings.RQUEUE``
on first use and caches the result until Django's ``setting_changed`` signal
says ``RQUEUE`` changed (``override_settings`` and pytest-django's
``settings`` fixture both send it). Nothing is read at import time.

The same :func:`problems` list feeds the system checks (``rqueue.E0xx`` /
``rqueue.W0xx``, see :mod:`django_rqueue.checks`) and the
``ImproperlyConfigured`` raised by :func:`get_config`, so a setting that a
check rejects can never be used silently.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from django.conf import settings
from django.core import checks
from django.core.checks import CheckMessage
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver

from . import backoff as backoffs
from .engine.keys import RECORD_DEFAULTS, JobFields
from .periodic import entries
from .periodic.entries import ScheduleEntry
from .serialization import MAX_JSON_BYTES

#: Backoff names accepted in ``DEFAULTS``/``QUEUES``/``@job(backoff=...)``.
BACKOFF_NAMES = frozenset(backoffs.NAMED)

#: Built-in values used when neither ``DEFAULTS`` nor a queue sets them.
#: ``timeout``, ``result_ttl`` and ``failed_ttl`` are seconds.
BUILTIN_DEFAULTS: dict[str, Any] = {
    # The job record leaves these three out while they hold these values (RECORD_DEFAULTS).
    "timeout": RECORD_DEFAULTS[JobFields.TIMEOUT_MS] // 1000,
    "max_attempts": RECORD_DEFAULTS[JobFields.MAX_ATTEMPTS],
    "backoff": "exponential",
    "result_ttl": RECORD_DEFAULTS[JobFields.RESULT_TTL],
    # Retention of the failed store: 90 days, 100 000 jobs (``None``: no limit).
    "failed_ttl": 90 * 86400,
    "failed_max": 100_000,
    # How fast the queue hands out jobs to all workers together (``None``: unlimited).
    "rate_limit": None,
}
#: The failed store's retention options, each a positive integer or ``None`` (no limit).
RETENTION_KEYS = ("failed_ttl", "failed_max")

#: ``REDIS_URL`` used when neither ``REDIS_URL`` nor ``CACHE_ALIAS`` is set.
DEFAULT_REDIS_URL = "redis://localhost:6379/0"

TOP_LEVEL_KEYS = frozenset(
    {
        "REDIS_URL",
        "CACHE_ALIAS",
        "KEY_PREFIX",
        "DEFAULT_QUEUE",
        "QUEUES",
        "DEFAULTS",
        "LEASE",
        "TIMEOUT_GRACE",
        "EAGER",
        "EAGER_PROPAGATE",
        "ASYNC_CONCURRENCY",
        "SCHEDULE",
        "WEBHOOKS",
        "SENTINELS",
        "SENTINEL_KWARGS",
        "MIN_REPLICAS_ACK",
        "MIN_REPLICAS_TIMEOUT",
        "REDIS_CLUSTER",
        "MAX_PAYLOAD_BYTES",
        "TASK_MODULES",
        "ENCRYPTION_KEYS",
    }
)
OPTION_KEYS = frozenset(BUILTIN_DEFAULTS)
QUEUE_KEYS = OPTION_KEYS | {"REDIS_URL", "group_concurrency"}

#: Queue names: letters, digits, ``_ . -``; at most 64 characters. Colons and
#: braces are excluded because queue names appear in job ids and in the
#: Redis Cluster hash tag of every key (see :mod:`django_rqueue.engine.keys`).
QUEUE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
#: A dotted module path (``TASK_MODULES``).
MODULE_PATH_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
KEY_PREFIX_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
REDIS_SCHEMES = frozenset({"redis", "rediss", "unix"})
#: Schemes of a ``REDIS_URL`` that names a service of ``SENTINELS``.
SENTINEL_SCHEMES = frozenset({"redis", "rediss"})
#: Default ``MIN_REPLICAS_TIMEOUT``, in seconds.
DEFAULT_REPLICAS_TIMEOUT = 1.0
#: Longest ``MIN_REPLICAS_TIMEOUT``, in seconds: well under the 10 s socket timeout
#: (:data:`django_rqueue.engine.connection.SOCKET_TIMEOUT`) of the ``WAIT`` that uses it.
MAX_REPLICAS_TIMEOUT = 5.0

#: Default ``MAX_PAYLOAD_BYTES``: 1 MiB of JSON arguments per job. Redis can hold far more
#: (a string up to 512 MB), but it writes and reads a value in one go on its single thread,
#: so big values delay every other client ("big keys" in Redis's latency guidance), and each
#: attempt moves the payload over the network again. Hosted queues cap a message in the
#: same range (Amazon SQS 256 KiB, Google Cloud Tasks 1 MB); larger data belongs in
#: storage, with its key as the argument. ``None`` lifts the limit.
DEFAULT_MAX_PAYLOAD_BYTES = 1_048_576

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
    #: ``None``: no limit but the 64 MiB a worker decodes (``serialization.MAX_JSON_BYTES``).
    max_payload_bytes: int | None = DEFAULT_MAX_PAYLOAD_BYTES
    #: ``RQUEUE["TASK_MODULES"]``: modules (and their submodules) outside the installed apps
    #: whose ``django.tasks`` tasks a worker may import.
    task_modules: tuple[str, ...] = ()
    #: ``RQUEUE["ENCRYPTION_KEYS"]``: Fernet keys (URL-safe base64 text), the first one
    #: encrypting; empty: job data is stored plain (:mod:`django_rqueue.encryption`).
    encryption_keys: tuple[str, ...] = ()

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


_cache: Config | None = None


@receiver(setting_changed)
def _reset(*, setting: str, **kwargs: object) -> None:
    global _cache
    if setting == "RQUEUE":
        _cache = None


def raw_setting() -> object:
    """Return ``settings.RQUEUE`` as given (``{}`` when unset)."""
    return getattr(settings, "RQUEUE", {})


def get_config() -> Config:
    """Return the parsed ``RQUEUE`` setting.

    Raises:
        ImproperlyConfigured: the setting has an error (the first one found,
            with its check id); ``manage.py check`` lists them all.
    """
    global _cache
    if _cache is None:
        raw = raw_setting()
        errors = [p for p in problems(raw) if p.is_serious()]
        if errors:
            first = errors[0]
            raise ImproperlyConfigured(f"{first.id}: {first.msg}")
        assert isinstance(raw, Mapping)  # noqa: S101 - guaranteed by problems()
        _cache = parse(raw)
    return _cache


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def unknown_keys(
    where: str,
    options: Mapping[str, Any],
    allowed: Collection[str],
    check_id: str = "rqueue.E002",
) -> list[CheckMessage]:
    """One ``check_id`` error per key of ``options`` not in ``allowed``, naming ``where``
    (e.g. ``"RQUEUE['QUEUES']['default']"``) and listing the allowed keys."""
    return [
        checks.Error(
            f"{where} has an unknown key {key!r}.",
            hint=f"Allowed keys: {', '.join(sorted(allowed))}.",
            id=check_id,
        )
        for key in options
        if key not in allowed
    ]


def _option_problems(
    where: str, options: Mapping[str, Any], allowed: frozenset[str]
) -> list[CheckMessage]:
    found = unknown_keys(where, options, allowed)
    if "timeout" in options and (not _is_number(options["timeout"]) or options["timeout"] <= 0):
        found.append(
            checks.Error(
                f"{where}['timeout'] must be a positive number of seconds.", id="rqueue.E005"
            )
        )
    attempts = options.get("max_attempts", 1)
    if not isinstance(attempts, int) or isinstance(attempts, bool) or attempts < 1:
        found.append(
            checks.Error(f"{where}['max_attempts'] must be an integer >= 1.", id="rqueue.E005")
        )
    ttl = options.get("result_ttl", 1)
    if not isinstance(ttl, int) or isinstance(ttl, bool) or ttl < 0:
        found.append(
            checks.Error(
                f"{where}['result_ttl'] must be an integer >= 0 (seconds).", id="rqueue.E005"
            )
        )
    backoff = options.get("backoff", "exponential")
    if not callable(backoff) and backoff not in BACKOFF_NAMES:
        found.append(
            checks.Error(
                f"{where}['backoff'] must be one of {', '.join(sorted(BACKOFF_NAMES))} "
                "or a callable (attempt, exception) -> seconds | None.",
                id="rqueue.E006",
            )
        )
    if options.get("rate_limit") is not None:
        try:
            RateLimit.parse(options["rate_limit"])
        except ValueError as exc:
            found.append(
                checks.Error(
                    f"{where}['rate_limit']: {exc}.",
                    hint="None (or no rate_limit) leaves the queue unlimited.",
                    id="rqueue.E030",
                )
            )
    found.extend(_retention_problems(where, options))
    if "REDIS_URL" in options:
        found.extend(_url_problems(f"{where}['REDIS_URL']", options["REDIS_URL"]))
    return found


def _group_concurrency_problems(where: str, options: Mapping[str, Any]) -> list[CheckMessage]:
    """A queue's ``group_concurrency``: an integer >= 1, or ``None``/absent for no cap."""
    cap = options.get("group_concurrency")
    if cap is None or (isinstance(cap, int) and not isinstance(cap, bool) and cap >= 1):
        return []
    return [
        checks.Error(
            f"{where}['group_concurrency'] must be an integer >= 1 or None, got {cap!r}.",
            hint="At most that many jobs of one group run at once across all workers; "
            "None (or leaving it out) means no cap.",
            id="rqueue.E060",
        )
    ]


def _retention_problems(where: str, options: Mapping[str, Any]) -> list[CheckMessage]:
    """``failed_ttl`` (seconds) and ``failed_max`` (jobs): an integer >= 1, or ``None``."""
    found: list[CheckMessage] = []
    for key in RETENTION_KEYS:
        value = options.get(key)
        if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
            continue
        found.append(
            checks.Error(
                f"{where}[{key!r}] must be an integer >= 1 or None (no limit), got {value!r}.",
                hint="failed_ttl is in seconds (default 90 days), failed_max a number of jobs "
                "(default 100000).",
                id="rqueue.E040",
            )
        )
    return found


def without_password(url: str) -> str:
    """``url`` with its password left out (``redis://user:secret@host/0`` ->
    ``redis://user@host/0``; a ``password=`` query parameter too), for messages and logs."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "password"]
    if parts.password is None and len(query) == len(parse_qsl(parts.query, True)):
        return url
    user = f"{parts.username}@" if parts.username else ""
    host = parts.netloc.rpartition("@")[2]
    tail = f"?{urlencode(query)}" if query else ""
    return f"{parts.scheme}://{user}{host}{parts.path}{tail}"


def _shown(url: object) -> str:
    """``url`` as a message quotes it: ``repr``, without the password of a string."""
    return repr(without_password(url) if isinstance(url, str) else url)


def _url_problems(where: str, url: object) -> list[CheckMessage]:
    if not isinstance(url, str) or urlsplit(url).scheme not in REDIS_SCHEMES:
        return [
            checks.Error(
                f"{where} must be a redis://, rediss:// or unix:// URL, got {_shown(url)}.",
                id="rqueue.E007",
            )
        ]
    return []


def problems(raw: object) -> list[CheckMessage]:
    """Return every problem of a raw ``RQUEUE`` value: ``checks.Error`` and ``checks.Warning``.

    Ids: E001 not a dict; E002 unknown key; E003 wrong type; E004 bad queue
    name or undeclared default queue; E005 non-positive timeout / lease /
    attempts / async concurrency; E006 bad backoff; E007 unusable Redis location (bad URL, both or
    missing cache alias, cache not backed by django-redis); E020-E022, E024, E025 a bad
    ``SCHEDULE`` (:func:`django_rqueue.periodic.entries.problems`); E030 a bad ``rate_limit``;
    E040 a bad ``failed_ttl`` or ``failed_max`` (the failed store's retention: an integer >= 1, or
    ``None``); E060 a queue's ``group_concurrency`` is not an integer >= 1 or None; E070-E075
    Redis Sentinel and durable enqueue (:func:`_replication_problems`); E110-E112 a bad
    ``ENCRYPTION_KEYS`` (:func:`_encryption_problems`). W001 no
    ``REDIS_URL``/``CACHE_ALIAS`` given (the local default is used); W070 ``SENTINEL_KWARGS``
    without ``SENTINELS``.
    """
    if not isinstance(raw, Mapping):
        return [
            checks.Error(
                "RQUEUE must be a dict.",
                hint="See the settings table in the README.",
                id="rqueue.E001",
            )
        ]
    return [
        *unknown_keys("RQUEUE", raw, TOP_LEVEL_KEYS),
        *_connection_problems(raw),
        *_queue_problems(raw),
        *_default_problems(raw),
        *_timing_problems(raw),
        *_eager_problems(raw),
        *_schedule_problems(raw),
        *_replication_problems(raw),
        *_cluster_problems(raw),
        *_encryption_problems(raw),
    ]


def _encryption_problems(raw: Mapping[str, Any]) -> list[CheckMessage]:
    """``ENCRYPTION_KEYS`` (:mod:`django_rqueue.encryption`); no message ever shows a key.

    Ids: E110 it is not a list of keys (``str`` or ``bytes``); E111 a key is not a Fernet
    key (32 bytes in URL-safe base64, as ``Fernet.generate_key()`` makes; named by its
    position); E112 keys are set but the ``cryptography`` package is not installed.
    """
    keys = raw.get("ENCRYPTION_KEYS")
    if keys is None:
        return []
    hint = (
        "A list of Fernet keys, the current one first, e.g. [os.environ['RQUEUE_KEY']]; make "
        "one with: python -c 'from cryptography.fernet import Fernet; "
        "print(Fernet.generate_key().decode())'"
    )
    if not isinstance(keys, list | tuple) or not all(isinstance(k, str | bytes) for k in keys):
        return [
            checks.Error(
                "RQUEUE['ENCRYPTION_KEYS'] must be a list of keys (str or bytes), got "
                + (
                    "an item of another type."
                    if isinstance(keys, list | tuple)
                    else f"a {type(keys).__name__}."
                ),
                hint=hint,
                id="rqueue.E110",
            )
        ]
    if not keys:
        return []
    try:
        from cryptography.fernet import Fernet
    except ImportError:
        return [
            checks.Error(
                "RQUEUE['ENCRYPTION_KEYS'] is set but the cryptography package is not installed.",
                hint="pip install 'django-rqueue[encryption]'",
                id="rqueue.E112",
            )
        ]
    found: list[CheckMessage] = []
    for index, key in enumerate(keys):
        try:
            Fernet(key)
        except (ValueError, TypeError):
            found.append(
                checks.Error(
                    f"RQUEUE['ENCRYPTION_KEYS'][{index}] is not a Fernet key (32 bytes in "
                    "URL-safe base64).",
                    hint=hint,
                    id="rqueue.E111",
                )
            )
    return found


def _cluster_problems(raw: Mapping[str, Any]) -> list[CheckMessage]:
    """``REDIS_CLUSTER``.

    Ids: E080 ``REDIS_CLUSTER`` is not ``True`` or ``False``; E081 it is on with
    ``CACHE_ALIAS`` (a django-redis cache has no cluster client here); E082 it is on with
    ``SENTINELS`` (a cluster fails over by itself); E083 it is on and a ``REDIS_URL`` (global
    or a queue's) cannot name a cluster node: a ``unix://`` socket, or a database other than 0
    (a cluster has only database 0); E084 it is on with ``MIN_REPLICAS_ACK`` > 0 (durable
    enqueue sends ``WAIT`` in a pipeline with the script, which redis-py's cluster
    pipelines do not carry).
    """
    cluster = raw.get("REDIS_CLUSTER", False)
    if not isinstance(cluster, bool):
        return [
            checks.Error(
                f"RQUEUE['REDIS_CLUSTER'] must be True or False, got {cluster!r}.",
                id="rqueue.E080",
            )
        ]
    if not cluster:
        return []
    found: list[CheckMessage] = []
    if raw.get("CACHE_ALIAS") is not None:
        found.append(
            checks.Error(
                "RQUEUE['REDIS_CLUSTER'] cannot be used with RQUEUE['CACHE_ALIAS'].",
                hint="Set REDIS_URL to the URL of any node of the cluster.",
                id="rqueue.E081",
            )
        )
    if raw.get("SENTINELS") is not None:
        found.append(
            checks.Error(
                "RQUEUE['REDIS_CLUSTER'] cannot be used with RQUEUE['SENTINELS'].",
                hint="A Redis Cluster promotes its replicas itself; drop SENTINELS.",
                id="rqueue.E082",
            )
        )
    if raw.get("MIN_REPLICAS_ACK"):
        found.append(
            checks.Error(
                "RQUEUE['MIN_REPLICAS_ACK'] is not supported with RQUEUE['REDIS_CLUSTER'].",
                hint="Drop MIN_REPLICAS_ACK (or set it to 0) on a Redis Cluster.",
                id="rqueue.E084",
            )
        )
    urls = [("RQUEUE['REDIS_URL']", raw.get("REDIS_URL"))]
    urls += [
        (f"RQUEUE['QUEUES'][{name!r}]['REDIS_URL']", options["REDIS_URL"])
        for name, options in _declared_queues(raw).items()
        if isinstance(options, Mapping) and "REDIS_URL" in options
    ]
    for where, url in urls:
        if not isinstance(url, str) or urlsplit(url).scheme not in REDIS_SCHEMES:
            continue  # absent, or E007's
        parts = urlsplit(url)
        db = parts.path.strip("/") or "0"
        if parts.scheme == "unix" or db != "0":
            found.append(
                checks.Error(
                    f"With RQUEUE['REDIS_CLUSTER'], {where} must name a node of the cluster "
                    f"as redis[s]://[user:password@]host:port[/0]; got {_shown(url)}.",
                    hint="A Redis Cluster has only database 0 and is reached over TCP.",
                    id="rqueue.E083",
                )
            )
    return found


def _schedule_problems(raw: Mapping[str, Any]) -> list[CheckMessage]:
    """``SCHEDULE``: periodic entries (see :func:`django_rqueue.periodic.entries.problems`)."""
    if "SCHEDULE" not in raw:
        return []
    return entries.problems(raw["SCHEDULE"], schedule_queues(raw))


def schedule_queues(raw: Mapping[str, Any]) -> set[str]:
    """The queues a ``SCHEDULE`` entry of a raw ``RQUEUE`` value may name."""
    declared = {"default", *_declared_queues(raw)}
    default_queue = raw.get("DEFAULT_QUEUE", "default")
    if isinstance(default_queue, str):
        declared.add(default_queue)
    return declared


def _connection_problems(raw: Mapping[str, Any]) -> list[CheckMessage]:
    """Where Redis is (``REDIS_URL`` or ``CACHE_ALIAS``) and the ``KEY_PREFIX`` of every key."""
    found: list[CheckMessage] = []
    url, alias = raw.get("REDIS_URL"), raw.get("CACHE_ALIAS")
    if url is not None and alias is not None:
        found.append(
            checks.Error(
                "Set RQUEUE['REDIS_URL'] or RQUEUE['CACHE_ALIAS'], not both.", id="rqueue.E007"
            )
        )
    elif url is not None:
        found.extend(_url_problems("RQUEUE['REDIS_URL']", url))
    elif alias is not None:
        found.extend(_cache_alias_problems(alias))
    else:
        found.append(
            checks.Warning(
                f"RQUEUE sets neither REDIS_URL nor CACHE_ALIAS; using {DEFAULT_REDIS_URL}.",
                id="rqueue.W001",
            )
        )
    prefix = raw.get("KEY_PREFIX", "rqueue")
    if not isinstance(prefix, str) or not KEY_PREFIX_RE.match(prefix):
        found.append(
            checks.Error(
                "RQUEUE['KEY_PREFIX'] must be 1-64 characters of [A-Za-z0-9_.:-].",
                id="rqueue.E003",
            )
        )
    return found


def _replication_problems(raw: Mapping[str, Any]) -> list[CheckMessage]:
    """``SENTINELS``, ``SENTINEL_KWARGS``, ``MIN_REPLICAS_ACK`` and ``MIN_REPLICAS_TIMEOUT``.

    Ids: E070 ``SENTINELS`` is not a non-empty list of ``(host, port)`` pairs;
    E071 with ``SENTINELS``, a ``REDIS_URL`` (global or a queue's) that does
    not name a service (``redis://`` or ``rediss://``, a service name, no port);
    E072 ``SENTINELS`` with ``CACHE_ALIAS``; E073 ``SENTINEL_KWARGS`` not a dict
    of option names; E074 ``MIN_REPLICAS_ACK`` not an integer >= 0; E075
    ``MIN_REPLICAS_TIMEOUT`` not a number of seconds in (0, 5]. W070
    ``SENTINEL_KWARGS`` without ``SENTINELS`` (ignored).
    """
    found: list[CheckMessage] = []
    sentinels = raw.get("SENTINELS")
    if sentinels is not None:
        found.extend(_sentinels_problems(sentinels))
        if raw.get("CACHE_ALIAS") is not None:
            found.append(
                checks.Error(
                    "RQUEUE['SENTINELS'] cannot be used with RQUEUE['CACHE_ALIAS'].",
                    hint="Set REDIS_URL to redis://<service name>/<db>, or configure Sentinel "
                    "in the django-redis cache and drop SENTINELS.",
                    id="rqueue.E072",
                )
            )
        else:
            urls = [("RQUEUE['REDIS_URL']", raw.get("REDIS_URL", DEFAULT_REDIS_URL))]
            urls += [
                (f"RQUEUE['QUEUES'][{name!r}]['REDIS_URL']", options["REDIS_URL"])
                for name, options in _declared_queues(raw).items()
                if isinstance(options, Mapping) and "REDIS_URL" in options
            ]
            for where, url in urls:
                found.extend(_service_url_problems(where, url))
    kwargs = raw.get("SENTINEL_KWARGS")
    if kwargs is not None:
        if not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs):
            found.append(
                checks.Error(
                    "RQUEUE['SENTINEL_KWARGS'] must be a dict of redis.Redis options "
                    "(such as {'password': ...}).",
                    id="rqueue.E073",
                )
            )
        elif sentinels is None:
            found.append(
                checks.Warning(
                    "RQUEUE['SENTINEL_KWARGS'] is ignored without RQUEUE['SENTINELS'].",
                    id="rqueue.W070",
                )
            )
    replicas = raw.get("MIN_REPLICAS_ACK", 0)
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        found.append(
            checks.Error(
                f"RQUEUE['MIN_REPLICAS_ACK'] must be an integer >= 0, got {replicas!r}.",
                hint="How many replicas must have an enqueued job before .delay() returns "
                "(0, the default: do not wait).",
                id="rqueue.E074",
            )
        )
    timeout = raw.get("MIN_REPLICAS_TIMEOUT", DEFAULT_REPLICAS_TIMEOUT)
    if not _is_number(timeout) or not 0 < timeout <= MAX_REPLICAS_TIMEOUT:
        found.append(
            checks.Error(
                "RQUEUE['MIN_REPLICAS_TIMEOUT'] must be a number of seconds > 0 and "
                f"<= {MAX_REPLICAS_TIMEOUT:g}, got {timeout!r}.",
                id="rqueue.E075",
            )
        )
    return found


def _sentinels_problems(sentinels: object) -> list[CheckMessage]:
    """E070 unless ``sentinels`` is a non-empty list (or tuple) of ``(host, port)`` pairs."""

    def pair(item: object) -> bool:
        if not isinstance(item, tuple | list) or len(item) != 2:
            return False
        host, port = item
        number = isinstance(port, int) and not isinstance(port, bool)
        return isinstance(host, str) and bool(host) and number and 0 < port < 65536

    if isinstance(sentinels, tuple | list) and sentinels and all(pair(i) for i in sentinels):
        return []
    return [
        checks.Error(
            f"RQUEUE['SENTINELS'] must be a non-empty list of (host, port) pairs, got "
            f"{sentinels!r}.",
            hint='For example [("sentinel-1", 26379), ("sentinel-2", 26379)].',
            id="rqueue.E070",
        )
    ]


def _service_url_problems(where: str, url: object) -> list[CheckMessage]:
    """E071 unless ``url`` is ``redis[s]://[user:password@]<service>[/<db>]`` (no port).

    A URL that is not a Redis URL at all is E007's (:func:`_url_problems`).
    """
    if not isinstance(url, str) or urlsplit(url).scheme not in REDIS_SCHEMES:
        return []
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = -1
    if parts.scheme in SENTINEL_SCHEMES and parts.hostname and port is None:
        return []
    error = checks.Error(
        f"With RQUEUE['SENTINELS'], {where} must name the master the sentinels monitor, "
        f"as redis://[user:password@]<service name>/<db> (or rediss://) without a port; "
        f"got {_shown(url)}.",
        hint="The host part of the URL is the service name of 'sentinel monitor <name> ...'.",
        id="rqueue.E071",
    )
    return [error]


def _declared_queues(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    """``RQUEUE['QUEUES']``, or ``{}`` when it is not a dict (that is reported elsewhere)."""
    queues = raw.get("QUEUES", {})
    return queues if isinstance(queues, Mapping) else {}


def _queue_problems(raw: Mapping[str, Any]) -> list[CheckMessage]:
    """``QUEUES``: a dict of valid queue names to valid options."""
    if not isinstance(raw.get("QUEUES", {}), Mapping):
        return [
            checks.Error(
                "RQUEUE['QUEUES'] must be a dict of queue name -> options.", id="rqueue.E003"
            )
        ]
    found: list[CheckMessage] = []
    for name, options in _declared_queues(raw).items():
        if not isinstance(name, str) or not QUEUE_NAME_RE.match(name):
            found.append(
                checks.Error(
                    f"Queue name {name!r} is invalid.",
                    hint="Use 1-64 characters of letters, digits, '_', '.', '-', starting with a "
                    "letter or digit.",
                    id="rqueue.E004",
                )
            )
        if not isinstance(options, Mapping):
            found.append(
                checks.Error(f"RQUEUE['QUEUES'][{name!r}] must be a dict.", id="rqueue.E003")
            )
            continue
        where = f"RQUEUE['QUEUES'][{name!r}]"
        found.extend(_option_problems(where, options, QUEUE_KEYS))
        found.extend(_group_concurrency_problems(where, options))
    return found


def _default_problems(raw: Mapping[str, Any]) -> list[CheckMessage]:
    """``DEFAULT_QUEUE`` (a valid name, declared when ``QUEUES`` is given) and ``DEFAULTS``."""
    found: list[CheckMessage] = []
    queues = _declared_queues(raw)
    default_queue = raw.get("DEFAULT_QUEUE", "default")
    if not isinstance(default_queue, str) or not QUEUE_NAME_RE.match(default_queue):
        found.append(
            checks.Error(f"RQUEUE['DEFAULT_QUEUE'] {default_queue!r} is invalid.", id="rqueue.E004")
        )
    elif queues and default_queue not in queues and default_queue != "default":
        found.append(
            checks.Error(
                f"RQUEUE['DEFAULT_QUEUE'] {default_queue!r} is not declared in RQUEUE['QUEUES'].",
                id="rqueue.E004",
            )
        )
    defaults = raw.get("DEFAULTS", {})
    if not isinstance(defaults, Mapping):
        found.append(checks.Error("RQUEUE['DEFAULTS'] must be a dict.", id="rqueue.E003"))
    else:
        found.extend(_option_problems("RQUEUE['DEFAULTS']", defaults, OPTION_KEYS))
    return found


def _timing_problems(raw: Mapping[str, Any]) -> list[CheckMessage]:
    """``LEASE``, ``TIMEOUT_GRACE``, ``MAX_PAYLOAD_BYTES`` (E090, E135), ``TASK_MODULES`` (E091) and
    ``ASYNC_CONCURRENCY``."""
    found: list[CheckMessage] = []
    lease = raw.get("LEASE", 30)
    if not _is_number(lease) or lease <= 0:
        found.append(
            checks.Error("RQUEUE['LEASE'] must be a positive number of seconds.", id="rqueue.E005")
        )
    grace = raw.get("TIMEOUT_GRACE", 5)
    if not _is_number(grace) or grace < 0:
        found.append(
            checks.Error(
                "RQUEUE['TIMEOUT_GRACE'] must be a number of seconds >= 0.", id="rqueue.E005"
            )
        )
    limit = raw.get("MAX_PAYLOAD_BYTES", DEFAULT_MAX_PAYLOAD_BYTES)
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        found.append(
            checks.Error(
                f"RQUEUE['MAX_PAYLOAD_BYTES'] must be an integer >= 1 or None, got {limit!r}.",
                hint="The largest JSON of a job's arguments, in bytes (default 1048576; "
                f"None: up to the {MAX_JSON_BYTES} bytes a worker decodes).",
                id="rqueue.E090",
            )
        )
    elif limit is not None and limit > MAX_JSON_BYTES:
        found.append(
            checks.Error(
                f"RQUEUE['MAX_PAYLOAD_BYTES'] is {limit}, more than the {MAX_JSON_BYTES} bytes "
                "of JSON a worker decodes: larger arguments would be accepted, then refused "
                "as corrupt by the worker.",
                hint=f"Use at most {MAX_JSON_BYTES}, or None (the same limit).",
                id="rqueue.E135",
            )
        )
    modules = raw.get("TASK_MODULES", ())
    if not isinstance(modules, list | tuple) or not all(
        isinstance(m, str) and MODULE_PATH_RE.match(m) for m in modules
    ):
        found.append(
            checks.Error(
                f"RQUEUE['TASK_MODULES'] must be a list of module paths, got {modules!r}.",
                hint="Modules outside INSTALLED_APPS whose django.tasks tasks workers may "
                "import, e.g. ['myproject.tasks'].",
                id="rqueue.E091",
            )
        )
    slots = raw.get("ASYNC_CONCURRENCY", 1)
    if not isinstance(slots, int) or isinstance(slots, bool) or slots < 1:
        found.append(
            checks.Error(
                f"RQUEUE['ASYNC_CONCURRENCY'] must be an integer >= 1, got {slots!r}.",
                hint="How many async jobs a worker child runs at once (default 1).",
                id="rqueue.E005",
            )
        )
    return found


def _eager_problems(raw: Mapping[str, Any]) -> list[CheckMessage]:
    """``EAGER`` and ``EAGER_PROPAGATE``: booleans."""
    return [
        checks.Error(f"RQUEUE[{key!r}] must be True or False.", id="rqueue.E003")
        for key in ("EAGER", "EAGER_PROPAGATE")
        if key in raw and not isinstance(raw[key], bool)
    ]


def _cache_alias_problems(alias: object) -> list[CheckMessage]:
    caches = getattr(settings, "CACHES", {})
    if not isinstance(alias, str) or alias not in caches:
        return [
            checks.Error(
                f"RQUEUE['CACHE_ALIAS'] {alias!r} is not a key of CACHES.",
                hint="Name a cache configured with django_redis.cache.RedisCache.",
                id="rqueue.E007",
            )
        ]
    backend = str(caches[alias].get("BACKEND", ""))
    if not backend.startswith("django_redis."):
        return [
            checks.Error(
                f"CACHES[{alias!r}] uses {backend!r}, not django-redis.",
                hint="CACHE_ALIAS reuses a django-redis connection; use REDIS_URL otherwise.",
                id="rqueue.E007",
            )
        ]
    return []


def parse(raw: Mapping[str, Any]) -> Config:
    """The :class:`Config` of a raw ``RQUEUE`` value that :func:`problems` finds no error in."""
    defaults = {**BUILTIN_DEFAULTS, **raw.get("DEFAULTS", {})}
    declared: dict[str, Any] = dict(raw.get("QUEUES", {}))
    default_queue = raw.get("DEFAULT_QUEUE", "default")
    declared.setdefault("default", {})
    declared.setdefault(default_queue, {})
    queues = {}
    for name, options in declared.items():
        merged = {**defaults, **options}
        queues[name] = QueueConfig(
            name=name,
            redis_url=options.get("REDIS_URL"),
            timeout=float(merged["timeout"]),
            max_attempts=int(merged["max_attempts"]),
            backoff=merged["backoff"],
            result_ttl=int(merged["result_ttl"]),
            failed_ttl=merged["failed_ttl"],
            failed_max=merged["failed_max"],
            group_concurrency=options.get("group_concurrency"),
            rate_limit=(
                None if merged["rate_limit"] is None else RateLimit.parse(merged["rate_limit"])
            ),
        )
    url = raw.get("REDIS_URL")
    alias = raw.get("CACHE_ALIAS")
    return Config(
        redis_url=url if url is not None or alias is not None else DEFAULT_REDIS_URL,
        cache_alias=alias,
        key_prefix=raw.get("KEY_PREFIX", "rqueue"),
        default_queue=default_queue,
        queues=queues,
        lease=float(raw.get("LEASE", 30)),
        timeout_grace=float(raw.get("TIMEOUT_GRACE", 5)),
        eager=bool(raw.get("EAGER", False)),
        eager_propagate=bool(raw.get("EAGER_PROPAGATE", False)),
        async_concurrency=int(raw.get("ASYNC_CONCURRENCY", 1)),
        schedule=entries.parse(raw.get("SCHEDULE", {})),
        sentinels=tuple((str(host), int(port)) for host, port in raw.get("SENTINELS") or ()),
        sentinel_kwargs=dict(raw.get("SENTINEL_KWARGS") or {}),
        min_replicas_ack=int(raw.get("MIN_REPLICAS_ACK", 0)),
        min_replicas_timeout=float(raw.get("MIN_REPLICAS_TIMEOUT", DEFAULT_REPLICAS_TIMEOUT)),
        redis_cluster=raw.get("REDIS_CLUSTER", False) is True,
        max_payload_bytes=raw.get("MAX_PAYLOAD_BYTES", DEFAULT_MAX_PAYLOAD_BYTES),
        task_modules=tuple(raw.get("TASK_MODULES", ())),
        encryption_keys=tuple(
            k.decode("ascii") if isinstance(k, bytes) else k
            for k in raw.get("ENCRYPTION_KEYS") or ()
        ),
    )
