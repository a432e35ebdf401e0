"""Parsing: a raw ``RQUEUE`` value without errors -> :class:`~.model.Config`.

Every absent key takes its row's default (:mod:`.conf.settings`); ``DEFAULTS`` merges over the
built-in job options, and each queue's options over ``DEFAULTS``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..periodic import entries
from . import defaults
from .model import Config, QueueConfig, RateLimit
from .settings import BUILTIN_DEFAULTS, BY_KEY


def _get(raw: Mapping[str, Any], key: str) -> Any:
    """``raw[key]``, or the default of ``key``'s row."""
    return raw.get(key, BY_KEY[key].default)


def parse(raw: Mapping[str, Any]) -> Config:
    """The :class:`~.model.Config` of a raw ``RQUEUE`` value that
    :func:`~.validation.problems` finds no error in."""
    url, alias = raw.get("REDIS_URL"), raw.get("CACHE_ALIAS")
    return Config(
        redis_url=url if url is not None or alias is not None else defaults.REDIS_URL,
        cache_alias=alias,
        key_prefix=_get(raw, "KEY_PREFIX"),
        default_queue=_get(raw, "DEFAULT_QUEUE"),
        queues=_queues(raw),
        lease=float(_get(raw, "LEASE")),
        timeout_grace=float(_get(raw, "TIMEOUT_GRACE")),
        eager=bool(_get(raw, "EAGER")),
        eager_propagate=bool(_get(raw, "EAGER_PROPAGATE")),
        async_concurrency=int(_get(raw, "ASYNC_CONCURRENCY")),
        schedule=entries.parse(_get(raw, "SCHEDULE")),
        sentinels=tuple((str(host), int(port)) for host, port in _get(raw, "SENTINELS") or ()),
        sentinel_kwargs=dict(_get(raw, "SENTINEL_KWARGS") or {}),
        min_replicas_ack=int(_get(raw, "MIN_REPLICAS_ACK")),
        min_replicas_timeout=float(_get(raw, "MIN_REPLICAS_TIMEOUT")),
        redis_cluster=_get(raw, "REDIS_CLUSTER") is True,
        max_payload_bytes=_get(raw, "MAX_PAYLOAD_BYTES"),
        task_modules=tuple(_get(raw, "TASK_MODULES")),
        encryption_keys=tuple(
            k.decode("ascii") if isinstance(k, bytes) else k
            for k in _get(raw, "ENCRYPTION_KEYS") or ()
        ),
        workflow_dependency_timeout=_timeout(_get(raw, "WORKFLOW_DEPENDENCY_TIMEOUT")),
        workflow_force_outbox=_get(raw, "WORKFLOW_FORCE_OUTBOX") is True,
        middleware=tuple(_get(raw, "MIDDLEWARE")),
    )


def _timeout(value: float | None) -> float | None:
    """A number of seconds as a float; ``None`` stays ``None`` (no limit)."""
    return None if value is None else float(value)


def _queues(raw: Mapping[str, Any]) -> dict[str, QueueConfig]:
    """Every declared queue, ``default`` and ``DEFAULT_QUEUE`` included, by name."""
    options_of_all = {**BUILTIN_DEFAULTS, **raw.get("DEFAULTS", {})}
    declared: dict[str, Any] = dict(_get(raw, "QUEUES"))
    declared.setdefault(defaults.DEFAULT_QUEUE, {})
    declared.setdefault(_get(raw, "DEFAULT_QUEUE"), {})
    queues = {}
    for name, options in declared.items():
        merged = {**options_of_all, **options}
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
    return queues
