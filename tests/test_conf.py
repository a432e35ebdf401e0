"""The RQUEUE setting (django_rqueue.conf): defaults, per-queue resolution, read at call time."""

from __future__ import annotations

import pytest
import redis
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from pytest_django.fixtures import Settings

from django_rqueue import job
from django_rqueue.conf import (
    BUILTIN_DEFAULTS,
    DEFAULT_REDIS_URL,
    RateLimit,
    get_config,
    problems,
)
from django_rqueue.engine.keys import QueueKeys


@job
def conf_job() -> None:
    return None


def _backoff(attempt: int, exc: BaseException) -> float:
    return 1.0


def test_built_in_defaults_apply_to_every_queue(settings: Settings):
    settings.RQUEUE = {"REDIS_URL": "redis://127.0.0.1:1/0"}
    config = get_config()
    assert config.key_prefix == "rqueue"
    assert config.default_queue == "default"
    assert list(config.queues) == ["default"]  # default always exists
    q = config.queue("default")
    assert (q.timeout, q.max_attempts, q.backoff, q.result_ttl) == (
        BUILTIN_DEFAULTS["timeout"],
        BUILTIN_DEFAULTS["max_attempts"],
        "exponential",
        BUILTIN_DEFAULTS["result_ttl"],
    )
    assert q.redis_url is None
    assert q.rate_limit is None  # unlimited
    assert (config.lease, config.timeout_grace, config.eager, config.eager_propagate) == (
        30.0,
        5.0,
        False,
        False,
    )
    assert config.async_concurrency == 1
    assert q.group_concurrency is None


def test_queue_options_override_defaults_which_override_built_ins(settings: Settings):
    settings.RQUEUE = {
        "REDIS_URL": "redis://127.0.0.1:1/0",
        "DEFAULTS": {"timeout": 60, "max_attempts": 7},
        "QUEUES": {
            "emails": {"timeout": 30, "backoff": _backoff, "REDIS_URL": "redis://other:6379/2"},
            "bulk": {"group_concurrency": 3},
        },
        "DEFAULT_QUEUE": "bulk",
        "LEASE": 4.5,
    }
    config = get_config()
    emails, bulk, default = config.queue("emails"), config.queue("bulk"), config.queue("default")
    assert (emails.timeout, emails.max_attempts, emails.backoff) == (30.0, 7, _backoff)
    assert emails.redis_url == "redis://other:6379/2"
    assert (bulk.timeout, bulk.max_attempts, bulk.redis_url) == (60.0, 7, None)
    assert (bulk.group_concurrency, emails.group_concurrency) == (3, None)
    assert default.max_attempts == 7
    assert config.default_queue == "bulk"
    assert config.lease == 4.5


def test_failed_store_retention_defaults_to_90_days_and_100000_jobs_and_none_lifts_it(
    settings: Settings,
):
    settings.RQUEUE = {
        "REDIS_URL": "redis://127.0.0.1:1/0",
        "DEFAULTS": {"failed_max": 500},
        "QUEUES": {"keep": {"failed_ttl": None, "failed_max": None}, "short": {"failed_ttl": 60}},
    }
    config = get_config()
    default, keep, short = config.queue("default"), config.queue("keep"), config.queue("short")
    assert (default.failed_ttl, default.failed_max) == (7_776_000, 500)
    assert (keep.failed_ttl, keep.failed_max) == (None, None)
    assert (short.failed_ttl, short.failed_max) == (60, 500)


def test_an_undeclared_queue_is_a_value_error_naming_the_declared_ones():
    with pytest.raises(ValueError, match=r"queue 'nope' is not declared.*default, emails, low"):
        get_config().queue("nope")


def test_neither_url_nor_cache_alias_means_the_local_default(settings: Settings):
    settings.RQUEUE = {}
    assert get_config().redis_url == DEFAULT_REDIS_URL
    assert get_config().cache_alias is None


def test_a_missing_setting_is_an_empty_one(settings: Settings):
    del settings.RQUEUE
    assert get_config().redis_url == DEFAULT_REDIS_URL


def test_an_invalid_setting_raises_improperly_configured_with_the_check_id(settings: Settings):
    settings.RQUEUE = {"REDIS_URL": "redis://x/0", "LEASE": 0}
    with pytest.raises(ImproperlyConfigured, match=r"rqueue\.E005"):
        get_config()


def test_override_settings_is_seen_at_call_time():
    assert get_config().lease == 2.0  # tests/settings.py
    first = get_config()
    assert get_config() is first  # parsed once, cached
    with override_settings(RQUEUE={"REDIS_URL": "redis://x:1/0", "LEASE": 9}):
        assert get_config().lease == 9.0
        assert get_config().redis_url == "redis://x:1/0"
    assert get_config().lease == 2.0


def test_delay_follows_a_changed_setting_at_call_time(
    settings: Settings, redis_client: redis.Redis
):
    first = conf_job.delay()
    assert redis_client.exists(QueueKeys.of("rqueue", "default").job(first.id))
    settings.RQUEUE = {
        **settings.RQUEUE,
        "KEY_PREFIX": "elsewhere",
        "DEFAULTS": {"max_attempts": 9},
    }
    second = conf_job.delay()
    assert second.max_attempts == 9
    stored = redis_client.hgetall(QueueKeys.of("elsewhere", "default").job(second.id))
    assert stored[b"max"] == b"9"
    assert not redis_client.exists(QueueKeys.of("rqueue", "default").job(second.id))


def test_problems_of_a_valid_setting_is_empty(settings: Settings):
    assert problems(settings.RQUEUE) == []


def test_sentinel_and_replication_settings_default_to_off(settings: Settings):
    settings.RQUEUE = {"REDIS_URL": "redis://127.0.0.1:1/0"}
    config = get_config()
    assert config.sentinels == ()
    assert config.sentinel_kwargs == {}
    assert (config.min_replicas_ack, config.min_replicas_timeout) == (0, 1.0)


def test_sentinel_and_replication_settings_are_parsed(settings: Settings):
    settings.RQUEUE = {
        "REDIS_URL": "redis://mymaster/1",
        "SENTINELS": [["s1", 26379], ("s2", 26380)],
        "SENTINEL_KWARGS": {"password": "pw"},
        "MIN_REPLICAS_ACK": 2,
        "MIN_REPLICAS_TIMEOUT": 0.25,
    }
    config = get_config()
    assert config.sentinels == (("s1", 26379), ("s2", 26380))
    assert config.sentinel_kwargs == {"password": "pw"}
    assert (config.min_replicas_ack, config.min_replicas_timeout) == (2, 0.25)


def test_redis_cluster_defaults_to_off_and_is_parsed(settings: Settings):
    settings.RQUEUE = {"REDIS_URL": "redis://127.0.0.1:1/0"}
    assert get_config().redis_cluster is False
    settings.RQUEUE = {"REDIS_URL": "redis://127.0.0.1:1", "REDIS_CLUSTER": True}
    assert get_config().redis_cluster is True


@pytest.mark.parametrize(
    ("text", "count", "per_seconds", "interval_ms"),
    [
        ("100/s", 100, 1, 10.0),
        ("6000/m", 6000, 60, 10.0),
        ("1000/h", 1000, 3600, 3600.0),
        ("3/s", 3, 1, 1000 / 3),
        ("1/m", 1, 60, 60_000.0),
    ],
)
def test_a_rate_limit_reads_as_count_per_period(
    text: str, count: int, per_seconds: int, interval_ms: float
):
    limit = RateLimit.parse(text)
    assert (limit.count, limit.per_seconds) == (count, per_seconds)
    assert limit.interval_ms == pytest.approx(interval_ms)
    assert str(limit) == text


@pytest.mark.parametrize(
    "value", ["100/x", "0/s", "-1/s", "1.5/s", "100 / s", " 100/s", "100/sec", "/s", 100, True]
)
def test_a_bad_rate_limit_is_a_value_error_saying_what_is_expected(value: object):
    with pytest.raises(ValueError, match=r"'<count>/<s\|m\|h>'.*got"):
        RateLimit.parse(value)


def test_a_queue_takes_the_default_rate_limit_unless_it_sets_its_own_or_none(settings: Settings):
    settings.RQUEUE = {
        "REDIS_URL": "redis://127.0.0.1:1/0",
        "DEFAULTS": {"rate_limit": "10/s"},
        "QUEUES": {"api": {"rate_limit": "6000/m"}, "free": {"rate_limit": None}, "other": {}},
    }
    config = get_config()
    assert config.queue("api").rate_limit == RateLimit(6000, 60)
    assert config.queue("free").rate_limit is None
    assert (
        config.queue("other").rate_limit == config.queue("default").rate_limit == RateLimit(10, 1)
    )
