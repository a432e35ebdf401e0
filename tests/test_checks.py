"""System checks on RQUEUE (django_rqueue.checks): one id per kind of mistake."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from django.core import checks
from django.test import override_settings

from django_rqueue.checks import check_settings
from django_rqueue.conf import without_password

URL = "redis://127.0.0.1:6379/0"
#: A valid Fernet key (``Fernet.generate_key()``), for tests only.
FERNET_KEY = "q6m6R2bh0dI6oBqJ3QMyIY4A8nH8xq2b6Jb1hm0uQ-s="


def _ids(rqueue: Any) -> list[str]:
    with override_settings(RQUEUE=rqueue):
        return sorted({m.id for m in checks.run_checks(tags=["rqueue"]) if m.id})


def test_the_test_settings_are_clean():
    assert checks.run_checks(tags=["rqueue"]) == []


def test_a_complete_valid_setting_is_clean():
    assert (
        _ids(
            {
                "REDIS_URL": "rediss://user:pw@redis.example:6380/3",
                "KEY_PREFIX": "app:rq",
                "DEFAULT_QUEUE": "emails",
                "QUEUES": {
                    "emails": {
                        "timeout": 30,
                        "max_attempts": 10,
                        "REDIS_URL": "unix:///tmp/r.sock",
                    },
                    "bulk.low": {
                        "backoff": lambda attempt, exc: None,
                        "result_ttl": 0,
                        "group_concurrency": 2,
                    },
                    "plain": {"group_concurrency": None},
                    "audit": {"failed_ttl": None, "failed_max": None},
                    "api": {"rate_limit": "100/s"},
                    "free": {"rate_limit": None},
                },
                "DEFAULTS": {
                    "timeout": 1.5,
                    "max_attempts": 1,
                    "backoff": "exponential",
                    "failed_ttl": 3600,
                    "failed_max": 1,
                    "rate_limit": "1000/h",
                },
                "LEASE": 0.5,
                "TIMEOUT_GRACE": 0,
                "EAGER": False,
                "EAGER_PROPAGATE": True,
                "ASYNC_CONCURRENCY": 50,
            }
        )
        == []
    )


@pytest.mark.parametrize(
    ("rqueue", "expected"),
    [
        # E001: not a dict
        (["REDIS_URL"], "rqueue.E001"),
        ("redis://localhost", "rqueue.E001"),
        # E002: unknown keys, at each level
        ({"REDIS_URL": URL, "REDIS": URL}, "rqueue.E002"),
        ({"REDIS_URL": URL, "QUEUES": {"a": {"tiemout": 3}}}, "rqueue.E002"),
        ({"REDIS_URL": URL, "DEFAULTS": {"REDIS_URL": URL}}, "rqueue.E002"),
        # E003: wrong types
        ({"REDIS_URL": URL, "QUEUES": ["a", "b"]}, "rqueue.E003"),
        ({"REDIS_URL": URL, "QUEUES": {"a": 1}}, "rqueue.E003"),
        ({"REDIS_URL": URL, "DEFAULTS": []}, "rqueue.E003"),
        ({"REDIS_URL": URL, "KEY_PREFIX": ""}, "rqueue.E003"),
        ({"REDIS_URL": URL, "KEY_PREFIX": "has space"}, "rqueue.E003"),
        ({"REDIS_URL": URL, "EAGER": "yes"}, "rqueue.E003"),
        ({"REDIS_URL": URL, "EAGER_PROPAGATE": 1}, "rqueue.E003"),
        # E004: bad queue names, undeclared default queue
        ({"REDIS_URL": URL, "QUEUES": {"a:b": {}}}, "rqueue.E004"),
        ({"REDIS_URL": URL, "QUEUES": {"{tag}": {}}}, "rqueue.E004"),
        ({"REDIS_URL": URL, "QUEUES": {"": {}}}, "rqueue.E004"),
        ({"REDIS_URL": URL, "QUEUES": {"x" * 65: {}}}, "rqueue.E004"),
        ({"REDIS_URL": URL, "DEFAULT_QUEUE": "ghost", "QUEUES": {"a": {}}}, "rqueue.E004"),
        ({"REDIS_URL": URL, "DEFAULT_QUEUE": "no spaces"}, "rqueue.E004"),
        # E005: non-positive numbers
        ({"REDIS_URL": URL, "DEFAULTS": {"timeout": 0}}, "rqueue.E005"),
        ({"REDIS_URL": URL, "QUEUES": {"a": {"timeout": -1}}}, "rqueue.E005"),
        ({"REDIS_URL": URL, "DEFAULTS": {"timeout": "30"}}, "rqueue.E005"),
        ({"REDIS_URL": URL, "DEFAULTS": {"max_attempts": 0}}, "rqueue.E005"),
        ({"REDIS_URL": URL, "DEFAULTS": {"max_attempts": 2.5}}, "rqueue.E005"),
        ({"REDIS_URL": URL, "DEFAULTS": {"max_attempts": True}}, "rqueue.E005"),
        ({"REDIS_URL": URL, "DEFAULTS": {"result_ttl": -1}}, "rqueue.E005"),
        ({"REDIS_URL": URL, "LEASE": 0}, "rqueue.E005"),
        ({"REDIS_URL": URL, "LEASE": "30"}, "rqueue.E005"),
        ({"REDIS_URL": URL, "TIMEOUT_GRACE": -1}, "rqueue.E005"),
        ({"REDIS_URL": URL, "ASYNC_CONCURRENCY": 0}, "rqueue.E005"),
        ({"REDIS_URL": URL, "ASYNC_CONCURRENCY": 2.5}, "rqueue.E005"),
        ({"REDIS_URL": URL, "ASYNC_CONCURRENCY": True}, "rqueue.E005"),
        ({"REDIS_URL": URL, "ASYNC_CONCURRENCY": "10"}, "rqueue.E005"),
        # E006: bad backoff
        ({"REDIS_URL": URL, "DEFAULTS": {"backoff": "linear"}}, "rqueue.E006"),
        ({"REDIS_URL": URL, "QUEUES": {"a": {"backoff": 5}}}, "rqueue.E006"),
        # E090: a payload limit that is not a byte count
        ({"REDIS_URL": URL, "MAX_PAYLOAD_BYTES": 0}, "rqueue.E090"),
        ({"REDIS_URL": URL, "MAX_PAYLOAD_BYTES": "1MB"}, "rqueue.E090"),
        ({"REDIS_URL": URL, "MAX_PAYLOAD_BYTES": True}, "rqueue.E090"),
        # E135: a payload limit above what a worker decodes
        ({"REDIS_URL": URL, "MAX_PAYLOAD_BYTES": 64 * 1024 * 1024 + 1}, "rqueue.E135"),
        # E091: TASK_MODULES not a list of module paths
        ({"REDIS_URL": URL, "TASK_MODULES": "myproject.tasks"}, "rqueue.E091"),
        ({"REDIS_URL": URL, "TASK_MODULES": ["my project"]}, "rqueue.E091"),
        # E110: ENCRYPTION_KEYS not a list of keys; E111: not a Fernet key
        ({"REDIS_URL": URL, "ENCRYPTION_KEYS": "a-single-key"}, "rqueue.E110"),
        ({"REDIS_URL": URL, "ENCRYPTION_KEYS": [1]}, "rqueue.E110"),
        ({"REDIS_URL": URL, "ENCRYPTION_KEYS": ["too-short"]}, "rqueue.E111"),
        ({"REDIS_URL": URL, "ENCRYPTION_KEYS": [FERNET_KEY, "x" * 44]}, "rqueue.E111"),
        # E007: unusable Redis location
        ({"REDIS_URL": "http://localhost:6379"}, "rqueue.E007"),
        ({"REDIS_URL": 6379}, "rqueue.E007"),
        ({"REDIS_URL": URL, "CACHE_ALIAS": "default"}, "rqueue.E007"),
        ({"CACHE_ALIAS": "missing"}, "rqueue.E007"),
        ({"REDIS_URL": URL, "QUEUES": {"a": {"REDIS_URL": "localhost:6379"}}}, "rqueue.E007"),
        # E060: a bad group_concurrency; it is a queue's own option, not a default
        ({"REDIS_URL": URL, "QUEUES": {"a": {"group_concurrency": 0}}}, "rqueue.E060"),
        ({"REDIS_URL": URL, "QUEUES": {"a": {"group_concurrency": -3}}}, "rqueue.E060"),
        ({"REDIS_URL": URL, "QUEUES": {"a": {"group_concurrency": 1.5}}}, "rqueue.E060"),
        ({"REDIS_URL": URL, "QUEUES": {"a": {"group_concurrency": "2"}}}, "rqueue.E060"),
        ({"REDIS_URL": URL, "QUEUES": {"a": {"group_concurrency": True}}}, "rqueue.E060"),
        ({"REDIS_URL": URL, "DEFAULTS": {"group_concurrency": 2}}, "rqueue.E002"),
        # E040: the failed store's retention is not a positive integer or None
        ({"REDIS_URL": URL, "DEFAULTS": {"failed_ttl": 0}}, "rqueue.E040"),
        ({"REDIS_URL": URL, "DEFAULTS": {"failed_max": -5}}, "rqueue.E040"),
        ({"REDIS_URL": URL, "QUEUES": {"a": {"failed_ttl": 3600.0}}}, "rqueue.E040"),
        ({"REDIS_URL": URL, "QUEUES": {"a": {"failed_max": "100"}}}, "rqueue.E040"),
        ({"REDIS_URL": URL, "QUEUES": {"a": {"failed_max": True}}}, "rqueue.E040"),
        # E030: a bad rate limit
        ({"REDIS_URL": URL, "QUEUES": {"a": {"rate_limit": "100/x"}}}, "rqueue.E030"),
        ({"REDIS_URL": URL, "QUEUES": {"a": {"rate_limit": "0/s"}}}, "rqueue.E030"),
        ({"REDIS_URL": URL, "QUEUES": {"a": {"rate_limit": 100}}}, "rqueue.E030"),
        ({"REDIS_URL": URL, "DEFAULTS": {"rate_limit": "fast"}}, "rqueue.E030"),
        # W001: nothing says where Redis is
        ({}, "rqueue.W001"),
        ({"QUEUES": {"a": {}}}, "rqueue.W001"),
    ],
)
def test_each_mistake_is_reported_with_its_id(rqueue: Any, expected: str):
    assert _ids(rqueue) == [expected]


def test_a_cache_alias_not_backed_by_django_redis_is_e007():
    caches = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    with override_settings(CACHES=caches, RQUEUE={"CACHE_ALIAS": "default"}):
        messages = check_settings()
    assert [m.id for m in messages] == ["rqueue.E007"]
    assert "not django-redis" in messages[0].msg


def test_a_django_redis_cache_alias_is_clean():
    caches = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        "redis": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": URL},
    }
    with override_settings(CACHES=caches, RQUEUE={"CACHE_ALIAS": "redis"}):
        assert check_settings() == []


def test_errors_are_errors_and_warnings_are_warnings():
    with override_settings(RQUEUE={"LEASE": 0}):
        messages = check_settings()
    by_id = {m.id: m for m in messages}
    assert set(by_id) == {"rqueue.E005", "rqueue.W001"}
    assert isinstance(by_id["rqueue.E005"], checks.Error)
    assert by_id["rqueue.W001"].level == checks.WARNING
    assert not isinstance(by_id["rqueue.W001"], checks.Error)


def test_every_problem_is_reported_not_just_the_first():
    messages = check_settings()
    assert messages == []
    with override_settings(
        RQUEUE={"REDIS_URL": URL, "BOGUS": 1, "LEASE": -1, "QUEUES": {"a:b": {"backoff": "x"}}}
    ):
        ids = sorted(m.id for m in check_settings() if m.id)
    assert ids == ["rqueue.E002", "rqueue.E004", "rqueue.E005", "rqueue.E006"]


def test_a_bad_group_concurrency_names_the_queue_and_the_value():
    with override_settings(RQUEUE={"REDIS_URL": URL, "QUEUES": {"bulk": {"group_concurrency": 0}}}):
        (message,) = check_settings()
    assert message.id == "rqueue.E060"
    assert message.msg == (
        "RQUEUE['QUEUES']['bulk']['group_concurrency'] must be an integer >= 1 or None, got 0."
    )


def test_an_unknown_key_names_the_allowed_ones_in_its_hint():
    with override_settings(RQUEUE={"REDIS_URL": URL, "LEASES": 3}):
        (message,) = check_settings()
    assert "'LEASES'" in message.msg
    assert message.hint is not None
    assert "LEASE" in message.hint


def _schedule_ids(schedule: dict[str, Any]) -> list[str]:
    rqueue = {"REDIS_URL": URL, "SCHEDULE": schedule}
    return _ids(rqueue)


def test_a_valid_schedule_is_clean():
    entry = {"job": "tests.jobs_app.jobs.record", "every": 5, "args": ["/tmp/l", "t"]}
    assert _schedule_ids({"e": entry}) == []


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"job": "no.such.job", "every": 5}, "rqueue.E023"),
        ({"job": "tests.jobs_app.jobs.record", "every": 5, "args": [1, 2, 3]}, "rqueue.E024"),
        ({"job": "tests.jobs_app.jobs.record", "every": 5, "kwargs": {"nope": 1}}, "rqueue.E024"),
        ({"job": "tests.jobs_app.jobs.record", "every": 5, "args": ["/l", {1, 2}]}, "rqueue.E024"),
        ({"job": "tests.jobs_app.jobs.record", "cron": "* * *"}, "rqueue.E021"),
        ({"job": "tests.jobs_app.jobs.record", "every": 5, "timezone": "Nowhere/X"}, "rqueue.E022"),
    ],
)
def test_schedule_mistakes_are_reported_by_manage_py_check(entry: dict[str, Any], expected: str):
    assert _schedule_ids({"e": entry}) == [expected]


def test_every_entry_s_mistakes_are_reported_in_one_run():
    record = "tests.jobs_app.jobs.record"
    schedule = {
        "bad_cron": {"job": record, "cron": "* * *"},
        "unknown_job": {"job": "no.such.job", "every": 5},
        "bad_args": {"job": record, "every": 5, "args": [1, 2, 3]},
        "both": {"job": "no.such.too", "every": 0},
    }
    with override_settings(RQUEUE={"REDIS_URL": URL, "SCHEDULE": schedule}):
        found = {(m.id, m.msg.split("'")[3]) for m in checks.run_checks(tags=["rqueue"])}
    assert found == {
        ("rqueue.E021", "bad_cron"),
        ("rqueue.E023", "unknown_job"),
        ("rqueue.E024", "bad_args"),
        ("rqueue.E021", "both"),
        ("rqueue.E023", "both"),
    }


def test_an_unknown_scheduled_job_s_hint_says_where_workers_find_jobs():
    schedule = {"e": {"job": "no.such.job", "every": 5}}
    with override_settings(RQUEUE={"REDIS_URL": URL, "SCHEDULE": schedule}):
        (found,) = checks.run_checks(tags=["rqueue"])
    assert found.id == "rqueue.E023"
    assert "import the 'jobs' module of every app in INSTALLED_APPS" in (found.hint or "")


SENTINELS = [("127.0.0.1", 26379), ("sentinel-2", 26380)]


def test_a_sentinel_setting_is_clean():
    rqueue = {
        "SENTINELS": SENTINELS,
        "REDIS_URL": "redis://user:pw@mymaster/2",
        "SENTINEL_KWARGS": {"password": "sentinel-secret"},
        "QUEUES": {"emails": {"REDIS_URL": "rediss://othermaster/0"}},
        "MIN_REPLICAS_ACK": 1,
        "MIN_REPLICAS_TIMEOUT": 0.5,
    }
    assert _ids(rqueue) == []


@pytest.mark.parametrize(
    ("rqueue", "expected"),
    [
        # E070: SENTINELS is not a non-empty list of (host, port) pairs
        ({"REDIS_URL": "redis://m/0", "SENTINELS": []}, "rqueue.E070"),
        ({"REDIS_URL": "redis://m/0", "SENTINELS": "127.0.0.1:26379"}, "rqueue.E070"),
        ({"REDIS_URL": "redis://m/0", "SENTINELS": [("127.0.0.1",)]}, "rqueue.E070"),
        ({"REDIS_URL": "redis://m/0", "SENTINELS": [("127.0.0.1", "26379")]}, "rqueue.E070"),
        ({"REDIS_URL": "redis://m/0", "SENTINELS": [("", 26379)]}, "rqueue.E070"),
        ({"REDIS_URL": "redis://m/0", "SENTINELS": [("h", 0)]}, "rqueue.E070"),
        ({"REDIS_URL": "redis://m/0", "SENTINELS": [("h", True)]}, "rqueue.E070"),
        # E071: with SENTINELS, a URL that does not name a service
        ({"REDIS_URL": "redis://mymaster:6379/0", "SENTINELS": SENTINELS}, "rqueue.E071"),
        ({"REDIS_URL": "unix:///tmp/redis.sock", "SENTINELS": SENTINELS}, "rqueue.E071"),
        ({"REDIS_URL": "redis:///0", "SENTINELS": SENTINELS}, "rqueue.E071"),
        (
            {
                "REDIS_URL": "redis://mymaster/0",
                "SENTINELS": SENTINELS,
                "QUEUES": {"a": {"REDIS_URL": "redis://10.0.0.1:6379/0"}},
            },
            "rqueue.E071",
        ),
        # E072: SENTINELS with CACHE_ALIAS (the alias is a valid django-redis one)
        ({"CACHE_ALIAS": "redis", "SENTINELS": SENTINELS}, "rqueue.E072"),
        # E073: SENTINEL_KWARGS is not a dict of option names
        (
            {"REDIS_URL": "redis://m/0", "SENTINELS": SENTINELS, "SENTINEL_KWARGS": "pw"},
            "rqueue.E073",
        ),
        (
            {"REDIS_URL": "redis://m/0", "SENTINELS": SENTINELS, "SENTINEL_KWARGS": {1: 2}},
            "rqueue.E073",
        ),
        # E074: MIN_REPLICAS_ACK is not an integer >= 0
        ({"REDIS_URL": URL, "MIN_REPLICAS_ACK": -1}, "rqueue.E074"),
        ({"REDIS_URL": URL, "MIN_REPLICAS_ACK": 1.5}, "rqueue.E074"),
        ({"REDIS_URL": URL, "MIN_REPLICAS_ACK": True}, "rqueue.E074"),
        # E075: MIN_REPLICAS_TIMEOUT is not seconds in (0, 5]
        ({"REDIS_URL": URL, "MIN_REPLICAS_TIMEOUT": 0}, "rqueue.E075"),
        ({"REDIS_URL": URL, "MIN_REPLICAS_TIMEOUT": 6}, "rqueue.E075"),
        ({"REDIS_URL": URL, "MIN_REPLICAS_TIMEOUT": "1"}, "rqueue.E075"),
        # W070: SENTINEL_KWARGS without SENTINELS
        ({"REDIS_URL": URL, "SENTINEL_KWARGS": {"password": "x"}}, "rqueue.W070"),
    ],
)
def test_each_sentinel_and_replication_mistake_is_reported_with_its_id(rqueue: Any, expected: str):
    caches = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        "redis": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": URL},
    }
    with override_settings(CACHES=caches):
        assert _ids(rqueue) == [expected]


def test_a_cluster_setting_is_clean():
    rqueue = {
        "REDIS_CLUSTER": True,
        "REDIS_URL": "redis://user:pw@node-1:7000",
        "QUEUES": {"emails": {"REDIS_URL": "rediss://other-cluster:7000/0"}},
    }
    assert _ids(rqueue) == []


@pytest.mark.parametrize(
    ("rqueue", "expected"),
    [
        # E080: REDIS_CLUSTER is not a boolean
        ({"REDIS_URL": URL, "REDIS_CLUSTER": "yes"}, "rqueue.E080"),
        ({"REDIS_URL": URL, "REDIS_CLUSTER": 1}, "rqueue.E080"),
        # E081: with CACHE_ALIAS (a valid django-redis one)
        ({"CACHE_ALIAS": "redis", "REDIS_CLUSTER": True}, "rqueue.E081"),
        # E082: with SENTINELS (whose URL names a service: no E071, no E083)
        ({"REDIS_URL": "redis://m", "SENTINELS": SENTINELS, "REDIS_CLUSTER": True}, "rqueue.E082"),
        # E083: a URL that cannot name a cluster node
        ({"REDIS_URL": "redis://node:7000/1", "REDIS_CLUSTER": True}, "rqueue.E083"),
        ({"REDIS_URL": "unix:///tmp/redis.sock", "REDIS_CLUSTER": True}, "rqueue.E083"),
        (
            {
                "REDIS_URL": "redis://node:7000",
                "REDIS_CLUSTER": True,
                "QUEUES": {"a": {"REDIS_URL": "redis://node:7000/2"}},
            },
            "rqueue.E083",
        ),
        # E084: with MIN_REPLICAS_ACK > 0
        (
            {"REDIS_URL": "redis://node:7000", "REDIS_CLUSTER": True, "MIN_REPLICAS_ACK": 1},
            "rqueue.E084",
        ),
    ],
)
def test_each_cluster_mistake_is_reported_with_its_id(rqueue: Any, expected: str):
    caches = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        "redis": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": URL},
    }
    with override_settings(CACHES=caches):
        assert _ids(rqueue) == [expected]


def test_sentinels_without_a_redis_url_flag_the_local_default_url():
    with override_settings(RQUEUE={"SENTINELS": SENTINELS}):
        messages = check_settings()
    by_id = {m.id: m for m in messages}
    assert set(by_id) == {"rqueue.E071", "rqueue.W001"}
    assert "redis://localhost:6379/0" in by_id["rqueue.E071"].msg
    assert "service name" in by_id["rqueue.E071"].msg


@pytest.mark.parametrize(
    ("url", "options", "expected", "shown"),
    [
        ("http://admin:s3cret@localhost:6379", {}, "rqueue.E007", "http://admin@localhost:6379"),
        (
            "redis://:s3cret@master:6379/0",
            {"SENTINELS": SENTINELS},
            "rqueue.E071",
            "redis://master:6379/0",
        ),
        (
            "redis://u:s3cret@node:7000/1",
            {"REDIS_CLUSTER": True},
            "rqueue.E083",
            "redis://u@node:7000/1",
        ),
        (
            "unix:///r.sock?db=1&password=s3cret",
            {"REDIS_CLUSTER": True},
            "rqueue.E083",
            "unix:///r.sock?db=1",
        ),
    ],
)
def test_a_url_in_a_message_never_shows_its_password(
    url: str, options: dict[str, Any], expected: str, shown: str
):
    with override_settings(RQUEUE={"REDIS_URL": url, **options}):
        messages = [m for m in check_settings() if m.id == expected]
    assert len(messages) == 1
    assert "s3cret" not in messages[0].msg
    assert repr(shown) in messages[0].msg


def test_without_password_leaves_out_the_password_and_nothing_else():
    cases = {
        "redis://localhost:6379/0": "redis://localhost:6379/0",
        "redis://:pw@h:1/0": "redis://h:1/0",
        "redis://u:p%40x@h/2?x=1": "redis://u@h/2?x=1",
        "rediss://u@h": "rediss://u@h",
        "unix:///tmp/s?db=1&password=x": "unix:///tmp/s?db=1",
        "redis://svc/0": "redis://svc/0",
    }
    assert {url: without_password(url) for url in cases} == cases


def test_valid_encryption_keys_are_clean_and_a_message_never_shows_a_key():
    assert _ids({"REDIS_URL": URL, "ENCRYPTION_KEYS": [FERNET_KEY, FERNET_KEY.encode()]}) == []
    assert _ids({"REDIS_URL": URL, "ENCRYPTION_KEYS": []}) == []
    almost = FERNET_KEY[:-2] + "!="  # one character off: a typo must not be printed either
    with override_settings(RQUEUE={"REDIS_URL": URL, "ENCRYPTION_KEYS": [FERNET_KEY, almost]}):
        (message,) = checks.run_checks(tags=["rqueue"])
    assert message.id == "rqueue.E111"
    assert "RQUEUE['ENCRYPTION_KEYS'][1] is not a Fernet key" in message.msg
    assert FERNET_KEY[:10] not in f"{message.msg} {message.hint}"


def test_encryption_keys_without_the_cryptography_package_is_e112(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setitem(sys.modules, "cryptography.fernet", None)  # import raises ImportError
    assert _ids({"REDIS_URL": URL, "ENCRYPTION_KEYS": [FERNET_KEY]}) == ["rqueue.E112"]


def test_a_bad_rate_limit_names_the_queue_and_the_value():
    with override_settings(RQUEUE={"REDIS_URL": URL, "QUEUES": {"api": {"rate_limit": "100/x"}}}):
        (message,) = check_settings()
    assert message.id == "rqueue.E030"
    assert "RQUEUE['QUEUES']['api']['rate_limit']" in message.msg
    assert "'100/x'" in message.msg
    assert "'100/s'" in message.msg  # what would do
