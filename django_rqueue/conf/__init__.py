"""The ``RQUEUE`` setting: :func:`get_config` parses it at call time and caches it until it changes.

:func:`get_config` parses ``settings.RQUEUE`` on first use and caches the result until
Django's ``setting_changed`` signal says ``RQUEUE`` changed (``override_settings`` and
pytest-django's ``settings`` fixture both send it). Nothing is read at import time.

The same :func:`~.validation.problems` list feeds the system checks (``rqueue.E0xx`` /
``rqueue.W0xx``, see :mod:`django_rqueue.checks`) and the ``ImproperlyConfigured`` raised
by :func:`get_config`, so a setting that a check rejects can never be used silently.

The package: :mod:`.defaults` (every default, once), :mod:`.settings` (one row per key:
type, default, check, doc, check ids), :mod:`.rules` (the check of one value),
:mod:`.validation` (every problem), :mod:`.parse` (raw setting -> :class:`Config`),
:mod:`.model` (the parsed values) and :mod:`.table` (the README's settings table).
"""

from __future__ import annotations

from collections.abc import Mapping

from django.conf import settings as django_settings  # ``settings`` is .settings, the rows
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver

from .defaults import REDIS_URL as DEFAULT_REDIS_URL
from .model import Config, QueueConfig, RateLimit
from .parse import parse
from .rules import BACKOFF_NAMES, without_password
from .settings import BUILTIN_DEFAULTS, OPTION_KEYS, QUEUE_KEYS, TOP_LEVEL_KEYS
from .validation import problems, schedule_queues, unknown_keys

__all__ = [
    "BACKOFF_NAMES",
    "BUILTIN_DEFAULTS",
    "DEFAULT_REDIS_URL",
    "OPTION_KEYS",
    "QUEUE_KEYS",
    "TOP_LEVEL_KEYS",
    "Config",
    "QueueConfig",
    "RateLimit",
    "get_config",
    "parse",
    "problems",
    "raw_setting",
    "schedule_queues",
    "unknown_keys",
    "without_password",
]

_cache: Config | None = None


@receiver(setting_changed)
def _reset(*, setting: str, **kwargs: object) -> None:
    global _cache
    if setting == "RQUEUE":
        _cache = None


def raw_setting() -> object:
    """Return ``settings.RQUEUE`` as given (``{}`` when unset)."""
    return getattr(django_settings, "RQUEUE", {})


def get_config() -> Config:
    """Return the parsed ``RQUEUE`` setting.

    Raises:
        django.core.exceptions.ImproperlyConfigured: the setting has an error (the first one
            found, with its check id); ``manage.py check`` lists them all.
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
