"""Every problem of a raw ``RQUEUE`` value (:func:`problems`), from the :mod:`.conf.settings` rows.

Each row's value check (:mod:`.rules`) runs when its key is given; right after it, the
key's entry in :data:`WITH_OTHERS` checks what depends on other keys too (a default queue
that ``QUEUES`` must declare, Sentinel with a cache alias, ...). The same list feeds the
system checks (:func:`django_rqueue.checks.check_settings`) and the
``ImproperlyConfigured`` of :func:`django_rqueue.conf.get_config`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings as django_settings
from django.core import checks
from django.core.checks import CheckMessage

from ..periodic import entries
from . import defaults
from .rules import REDIS_SCHEMES, is_queue_name, is_redis_url, redis_url, shown
from .settings import (
    OPTION_KEYS,
    OPTIONS,
    QUEUE_KEYS,
    QUEUE_OPTIONS,
    SETTINGS,
    TOP_LEVEL_KEYS,
    Setting,
)

#: Schemes of a ``REDIS_URL`` that names a service of ``SENTINELS``.
SENTINEL_SCHEMES = frozenset({"redis", "rediss"})


def problems(raw: object) -> list[CheckMessage]:
    """Return every problem of a raw ``RQUEUE`` value: ``checks.Error`` and ``checks.Warning``.

    Ids: E001 not a dict; E002 unknown key; E003 wrong type; E004 bad queue
    name or undeclared default queue; E005 non-positive timeout / lease /
    attempts / async concurrency; E006 bad backoff; E007 unusable Redis location (bad URL, both or
    missing cache alias, cache not backed by django-redis); E020-E022, E024, E025 a bad
    ``SCHEDULE`` (:func:`django_rqueue.periodic.entries.problems`); E030 a bad ``rate_limit``;
    E040 a bad ``failed_ttl`` or ``failed_max`` (the failed store's retention: an integer >= 1, or
    ``None``); E060 a queue's ``group_concurrency`` is not an integer >= 1 or None; E070-E075
    Redis Sentinel and durable enqueue (``_sentinels``); E080-E084 Redis Cluster
    (``_cluster``); E090, E135 ``MAX_PAYLOAD_BYTES``; E091 ``TASK_MODULES``; E110-E112 a
    bad ``ENCRYPTION_KEYS`` (:func:`.rules.encryption_keys`). W001 no
    ``REDIS_URL``/``CACHE_ALIAS`` given (the local default is used); W070 ``SENTINEL_KWARGS``
    without ``SENTINELS``. Each row of :mod:`.conf.settings` lists the ids of its key.
    """
    if not isinstance(raw, Mapping):
        return [
            checks.Error(
                "RQUEUE must be a dict.",
                hint="See the settings table in the README.",
                id="rqueue.E001",
            )
        ]
    found = unknown_keys("RQUEUE", raw, TOP_LEVEL_KEYS)
    for row in SETTINGS:
        own = _value_problems("RQUEUE", raw, row)
        found += own
        if row.key in WITH_OTHERS:
            found += WITH_OTHERS[row.key](raw, not own)
    return found


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


def _value_problems(where: str, options: Mapping[str, Any], row: Setting) -> list[CheckMessage]:
    """The problems of ``options[row.key]`` alone, if given (``where``: what holds it)."""
    if row.check is None or row.key not in options:
        return []
    return row.check(f"{where}[{row.key!r}]", options[row.key])


def _option_problems(
    where: str, options: Mapping[str, Any], allowed: Collection[str], rows: Iterable[Setting]
) -> list[CheckMessage]:
    """Unknown keys of a dict of job options, then each of ``rows`` given in it."""
    found = unknown_keys(where, options, allowed)
    for row in rows:
        found += _value_problems(where, options, row)
    return found


def declared_queues(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    """``RQUEUE['QUEUES']``, or ``{}`` when it is not a dict (that is reported elsewhere)."""
    queues = raw.get("QUEUES", {})
    return queues if isinstance(queues, Mapping) else {}


def schedule_queues(raw: Mapping[str, Any]) -> set[str]:
    """The queues a ``SCHEDULE`` entry of a raw ``RQUEUE`` value may name."""
    declared = {defaults.DEFAULT_QUEUE, *declared_queues(raw)}
    default_queue = raw.get("DEFAULT_QUEUE", defaults.DEFAULT_QUEUE)
    if isinstance(default_queue, str):
        declared.add(default_queue)
    return declared


def _redis_urls(raw: Mapping[str, Any], default: str | None) -> list[tuple[str, object]]:
    """``(where, url)`` of every ``REDIS_URL``: the global one (``default`` when not given),
    then each queue's own."""
    urls: list[tuple[str, object]] = [("RQUEUE['REDIS_URL']", raw.get("REDIS_URL", default))]
    urls += [
        (f"RQUEUE['QUEUES'][{name!r}]['REDIS_URL']", options["REDIS_URL"])
        for name, options in declared_queues(raw).items()
        if isinstance(options, Mapping) and "REDIS_URL" in options
    ]
    return urls


# ------------------------------------------- checks of a key that read other keys too --


def _connection(raw: Mapping[str, Any], _: bool) -> list[CheckMessage]:
    """Where Redis is: ``REDIS_URL`` or ``CACHE_ALIAS`` (E007), or the local default (W001)."""
    url, alias = raw.get("REDIS_URL"), raw.get("CACHE_ALIAS")
    if url is not None and alias is not None:
        return [
            checks.Error(
                "Set RQUEUE['REDIS_URL'] or RQUEUE['CACHE_ALIAS'], not both.", id="rqueue.E007"
            )
        ]
    if url is not None:
        return redis_url("RQUEUE['REDIS_URL']", url)
    if alias is not None:
        return _cache_alias(alias)
    return [
        checks.Warning(
            f"RQUEUE sets neither REDIS_URL nor CACHE_ALIAS; using {defaults.REDIS_URL}.",
            id="rqueue.W001",
        )
    ]


def _cache_alias(alias: object) -> list[CheckMessage]:
    """E007 unless ``alias`` names a django-redis cache of ``CACHES``."""
    caches = getattr(django_settings, "CACHES", {})
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


def _queues(raw: Mapping[str, Any], is_dict: bool) -> list[CheckMessage]:
    """Each of ``QUEUES``: a valid name (E004) to a dict (E003) of valid options."""
    found: list[CheckMessage] = []
    for name, options in declared_queues(raw).items() if is_dict else ():
        if not is_queue_name(name):
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
        found += _option_problems(where, options, QUEUE_KEYS, (*OPTIONS, *QUEUE_OPTIONS))
    return found


def _default_queue(raw: Mapping[str, Any], is_name: bool) -> list[CheckMessage]:
    """E004: ``DEFAULT_QUEUE`` is not declared although ``QUEUES`` is given."""
    queues = declared_queues(raw)
    default_queue = raw.get("DEFAULT_QUEUE", defaults.DEFAULT_QUEUE)
    if is_name and queues and default_queue not in {*queues, defaults.DEFAULT_QUEUE}:
        return [
            checks.Error(
                f"RQUEUE['DEFAULT_QUEUE'] {default_queue!r} is not declared in RQUEUE['QUEUES'].",
                id="rqueue.E004",
            )
        ]
    return []


#: The rows a dict of ``DEFAULTS`` is checked against: the job options, and ``REDIS_URL``
#: (a queue's own option: given in ``DEFAULTS`` it is unknown, E002, and, if bad, E007 too).
_DEFAULTS_ROWS = (*OPTIONS, *(row for row in QUEUE_OPTIONS if row.key == "REDIS_URL"))


def _defaults(raw: Mapping[str, Any], is_dict: bool) -> list[CheckMessage]:
    """The job options of ``DEFAULTS``."""
    if not is_dict:
        return []
    options = raw.get("DEFAULTS", {})
    return _option_problems("RQUEUE['DEFAULTS']", options, OPTION_KEYS, _DEFAULTS_ROWS)


def _schedule(raw: Mapping[str, Any], _: bool) -> list[CheckMessage]:
    """``SCHEDULE``: periodic entries (see :func:`django_rqueue.periodic.entries.problems`)."""
    if "SCHEDULE" not in raw:
        return []
    return entries.problems(raw["SCHEDULE"], schedule_queues(raw))


def _sentinels(raw: Mapping[str, Any], _: bool) -> list[CheckMessage]:
    """With ``SENTINELS``: no ``CACHE_ALIAS`` (E072), and every ``REDIS_URL`` names a service
    (E071: ``redis://`` or ``rediss://``, a service name, no port)."""
    if raw.get("SENTINELS") is None:
        return []
    if raw.get("CACHE_ALIAS") is not None:
        return [
            checks.Error(
                "RQUEUE['SENTINELS'] cannot be used with RQUEUE['CACHE_ALIAS'].",
                hint="Set REDIS_URL to redis://<service name>/<db>, or configure Sentinel "
                "in the django-redis cache and drop SENTINELS.",
                id="rqueue.E072",
            )
        ]
    found: list[CheckMessage] = []
    for where, url in _redis_urls(raw, defaults.REDIS_URL):
        found += _service_url(where, url)
    return found


def _service_url(where: str, url: object) -> list[CheckMessage]:
    """E071 unless ``url`` is ``redis[s]://[user:password@]<service>[/<db>]`` (no port).

    A URL that is not a Redis URL at all is E007's (:func:`.rules.redis_url`).
    """
    if not isinstance(url, str) or not is_redis_url(url):
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
        f"got {shown(url)}.",
        hint="The host part of the URL is the service name of 'sentinel monitor <name> ...'.",
        id="rqueue.E071",
    )
    return [error]


def _sentinel_kwargs(raw: Mapping[str, Any], is_dict: bool) -> list[CheckMessage]:
    """W070: ``SENTINEL_KWARGS`` without ``SENTINELS`` is ignored."""
    if is_dict and raw.get("SENTINEL_KWARGS") is not None and raw.get("SENTINELS") is None:
        return [
            checks.Warning(
                "RQUEUE['SENTINEL_KWARGS'] is ignored without RQUEUE['SENTINELS'].",
                id="rqueue.W070",
            )
        ]
    return []


def _cluster(raw: Mapping[str, Any], is_bool: bool) -> list[CheckMessage]:
    """``REDIS_CLUSTER`` on: E081 with ``CACHE_ALIAS`` (a django-redis cache has no cluster
    client here); E082 with ``SENTINELS`` (a cluster fails over by itself); E084 with
    ``MIN_REPLICAS_ACK`` > 0 (durable enqueue sends ``WAIT`` in a pipeline with the script,
    which redis-py's cluster pipelines do not carry); E083 a ``REDIS_URL`` (global or a
    queue's) cannot name a cluster node: a ``unix://`` socket, or a database other than 0
    (a cluster has only database 0)."""
    if not is_bool or not raw.get("REDIS_CLUSTER", defaults.REDIS_CLUSTER):
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
    for where, url in _redis_urls(raw, None):
        if not isinstance(url, str) or urlsplit(url).scheme not in REDIS_SCHEMES:
            continue  # absent, or E007's
        parts = urlsplit(url)
        db = parts.path.strip("/") or "0"
        if parts.scheme == "unix" or db != "0":
            found.append(
                checks.Error(
                    f"With RQUEUE['REDIS_CLUSTER'], {where} must name a node of the cluster "
                    f"as redis[s]://[user:password@]host:port[/0]; got {shown(url)}.",
                    hint="A Redis Cluster has only database 0 and is reached over TCP.",
                    id="rqueue.E083",
                )
            )
    return found


#: ``key -> check(raw, the key's own value passed its check)``: what a key's value means
#: together with other keys, checked right after that value (in the order of the rows).
WITH_OTHERS: Mapping[str, Callable[[Mapping[str, Any], bool], list[CheckMessage]]] = {
    "REDIS_URL": _connection,
    "QUEUES": _queues,
    "DEFAULT_QUEUE": _default_queue,
    "DEFAULTS": _defaults,
    "SCHEDULE": _schedule,
    "SENTINELS": _sentinels,
    "SENTINEL_KWARGS": _sentinel_kwargs,
    "REDIS_CLUSTER": _cluster,
}
