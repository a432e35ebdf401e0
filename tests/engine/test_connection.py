"""Which Redis client a queue gets, read from settings at call time."""

import pytest
import redis
from pytest_django.fixtures import Settings

from django_rqueue.engine.connection import get_client
from tests.support.redis_server import RedisServer


def test_the_client_follows_the_setting_at_call_time(settings: Settings, redis_server: RedisServer):
    first = get_client("default")
    assert first.ping()
    assert get_client("default") is first  # cached per location
    settings.RQUEUE = {**settings.RQUEUE, "REDIS_URL": redis_server.url.replace("/0", "/3")}
    other = get_client("default")
    assert other is not first
    other.set("probe", "1")
    assert redis.Redis.from_url(redis_server.url.replace("/0", "/3")).get("probe") == b"1"


def test_a_queue_with_its_own_redis_url_gets_its_own_client(
    settings: Settings, redis_server: RedisServer
):
    own = redis_server.url.replace("/0", "/5")
    settings.RQUEUE = {**settings.RQUEUE, "QUEUES": {"default": {}, "emails": {"REDIS_URL": own}}}
    get_client("emails").set("where", "emails")
    assert redis.Redis.from_url(own).get("where") == b"emails"
    assert get_client("default").get("where") is None


def test_cache_alias_reuses_the_django_redis_connection(
    settings: Settings, redis_server: RedisServer
):
    from django_redis import get_redis_connection

    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        "jobs": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": redis_server.url},
    }
    settings.RQUEUE = {"CACHE_ALIAS": "jobs", "QUEUES": {"default": {}}}
    assert get_client("default") is get_redis_connection("jobs")


def test_an_undeclared_queue_is_a_value_error():
    with pytest.raises(ValueError, match="'nope' is not declared"):
        get_client("nope")
