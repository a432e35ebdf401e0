"""The check of one setting's value alone: a :data:`ValueCheck` per kind of value.

A settings row (:mod:`.conf.settings`) names its value check; :mod:`.validation` calls it as
``check(where, value)`` when the key is given, with ``where`` the key as a message names it
(``"RQUEUE['LEASE']"``, ``"RQUEUE['QUEUES']['emails']['timeout']"``), and adds the checks
that look at several settings together. Every default passes its own row's check.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from django.core import checks
from django.core.checks import CheckMessage

from .. import backoff as backoffs
from . import defaults
from .model import RateLimit

#: ``check(where, value)``: the problems of one value, ``[]`` when it is fine.
ValueCheck = Callable[[str, Any], list[CheckMessage]]

#: Backoff names accepted in ``DEFAULTS``/``QUEUES``/``@job(backoff=...)``.
BACKOFF_NAMES = frozenset(backoffs.NAMED)
#: Queue names: letters, digits, ``_ . -``; at most 64 characters. Colons and
#: braces are excluded because queue names appear in job ids and in the
#: Redis Cluster hash tag of every key (see :mod:`django_rqueue.engine.keys`).
QUEUE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
#: A dotted module path (``TASK_MODULES``).
MODULE_PATH_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
KEY_PREFIX_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
#: The URL schemes of a Redis location (``unix`` for a Unix socket).
REDIS_SCHEMES = frozenset({"redis", "rediss", "unix"})


@dataclass(frozen=True)
class Rule:
    """A :data:`ValueCheck` of one test and one error: ``[]`` when ``test(value)`` holds.

    ``message`` is a :meth:`str.format` template of ``{where}`` and ``{value}`` (so a
    literal brace is doubled).
    """

    test: Callable[[Any], bool]
    message: str
    id: str
    hint: str | None = None

    def __call__(self, where: str, value: Any) -> list[CheckMessage]:
        if self.test(value):
            return []
        return [
            checks.Error(self.message.format(where=where, value=value), hint=self.hint, id=self.id)
        ]


def is_number(value: object) -> bool:
    """An ``int`` or ``float`` that is not a ``bool``."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_int(value: object, at_least: int) -> bool:
    """An ``int`` (not a ``bool``) >= ``at_least``."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= at_least


def is_queue_name(value: object) -> bool:
    """A valid queue name (:data:`QUEUE_NAME_RE`)."""
    return isinstance(value, str) and QUEUE_NAME_RE.match(value) is not None


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


def shown(url: object) -> str:
    """``url`` as a message quotes it: ``repr``, without the password of a string."""
    return repr(without_password(url) if isinstance(url, str) else url)


def is_redis_url(url: object) -> bool:
    """A string with a scheme of :data:`REDIS_SCHEMES`."""
    return isinstance(url, str) and urlsplit(url).scheme in REDIS_SCHEMES


def redis_url(where: str, url: object) -> list[CheckMessage]:
    """E007 unless ``url`` is a ``redis://``, ``rediss://`` or ``unix://`` URL."""
    if is_redis_url(url):
        return []
    return [
        checks.Error(
            f"{where} must be a redis://, rediss:// or unix:// URL, got {shown(url)}.",
            id="rqueue.E007",
        )
    ]


def rate_limit(where: str, value: object) -> list[CheckMessage]:
    """E030 unless ``value`` is ``None`` or parses as a :class:`~.model.RateLimit`."""
    if value is None:
        return []
    try:
        RateLimit.parse(value)
    except ValueError as exc:
        return [
            checks.Error(
                f"{where}: {exc}.",
                hint="None (or no rate_limit) leaves the queue unlimited.",
                id="rqueue.E030",
            )
        ]
    return []


def max_payload_bytes(where: str, limit: object) -> list[CheckMessage]:
    """E090 unless ``limit`` is an integer >= 1 or ``None``; E135 above what a worker decodes."""
    ceiling = defaults.MAX_JSON_BYTES
    if limit is not None and not is_int(limit, 1):
        return [
            checks.Error(
                f"{where} must be an integer >= 1 or None, got {limit!r}.",
                hint=f"The largest JSON of a job's arguments, in bytes (default "
                f"{defaults.MAX_PAYLOAD_BYTES}; None: up to the {ceiling} bytes a worker decodes).",
                id="rqueue.E090",
            )
        ]
    if isinstance(limit, int) and limit > ceiling:
        return [
            checks.Error(
                f"{where} is {limit}, more than the {ceiling} bytes "
                "of JSON a worker decodes: larger arguments would be accepted, then refused "
                "as corrupt by the worker.",
                hint=f"Use at most {ceiling}, or None (the same limit).",
                id="rqueue.E135",
            )
        ]
    return []


def _is_sentinel(item: object) -> bool:
    """A ``(host, port)`` pair: a non-empty host name and a TCP port."""
    if not isinstance(item, tuple | list) or len(item) != 2:
        return False
    host, port = item
    return isinstance(host, str) and bool(host) and is_int(port, 1) and port < 65536


def _are_sentinels(value: object) -> bool:
    return value is None or (
        isinstance(value, tuple | list) and bool(value) and all(map(_is_sentinel, value))
    )


#: E070 unless ``SENTINELS`` is ``None`` or a non-empty list (or tuple) of ``(host, port)``.
sentinels = Rule(
    _are_sentinels,
    "{where} must be a non-empty list of (host, port) pairs, got {value!r}.",
    "rqueue.E070",
    hint='For example [("sentinel-1", 26379), ("sentinel-2", 26379)].',
)

#: Where to get a Fernet key, the hint of E110 and E111.
_FERNET_HINT = (
    "A list of Fernet keys, the current one first, e.g. [os.environ['RQUEUE_KEY']]; make "
    "one with: python -c 'from cryptography.fernet import Fernet; "
    "print(Fernet.generate_key().decode())'"
)


def encryption_keys(where: str, keys: object) -> list[CheckMessage]:
    """``ENCRYPTION_KEYS`` (:mod:`django_rqueue.encryption`); no message ever shows a key.

    Ids: E110 it is not a list of keys (``str`` or ``bytes``); E111 a key is not a Fernet
    key (32 bytes in URL-safe base64, as ``Fernet.generate_key()`` makes; named by its
    position); E112 keys are set but the ``cryptography`` package is not installed.
    """
    if keys is None:
        return []
    if not isinstance(keys, list | tuple) or not all(isinstance(k, str | bytes) for k in keys):
        return [
            checks.Error(
                f"{where} must be a list of keys (str or bytes), got "
                + (
                    "an item of another type."
                    if isinstance(keys, list | tuple)
                    else f"a {type(keys).__name__}."
                ),
                hint=_FERNET_HINT,
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
                f"{where} is set but the cryptography package is not installed.",
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
                    f"{where}[{index}] is not a Fernet key (32 bytes in URL-safe base64).",
                    hint=_FERNET_HINT,
                    id="rqueue.E111",
                )
            )
    return found


def is_mapping(value: object) -> bool:
    """A ``dict`` (any :class:`~collections.abc.Mapping`)."""
    return isinstance(value, Mapping)


def is_bool(value: object) -> bool:
    """``True`` or ``False``."""
    return isinstance(value, bool)
