"""Django settings for the django-rqueue test suite (DJANGO_SETTINGS_MODULE=tests.settings).

The Redis URL below is only a fallback: ``tests/conftest.py`` starts a private
``redis-server`` on a free port and points both ``settings.RQUEUE["REDIS_URL"]``
and the ``RQUEUE_TEST_REDIS_URL`` environment variable (for subprocess workers,
which import these settings) at it.
"""

import json
import os
import tempfile
from pathlib import Path
from typing import Any

BASE_DIR = Path(__file__).resolve().parent

SECRET_KEY = "django-rqueue-tests-not-a-secret"
DEBUG = False
ALLOWED_HOSTS = ["testserver", "localhost", "127.0.0.1"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django_rqueue",
    "django_rqueue.contrib.webhooks",
    "tests.jobs_app",
]

MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]

ROOT_URLCONF = "tests.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# The test database itself is in-memory (pytest-django's default for SQLite);
# NAME only matters for code that opens the database outside the test runner.
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get(
            "RQUEUE_TEST_DB", str(Path(tempfile.gettempdir()) / "django_rqueue_tests.sqlite3")
        ),
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

USE_TZ = True
TIME_ZONE = "UTC"
LANGUAGE_CODE = "en-us"
STATIC_URL = "/static/"

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast tests


def quick_backoff(attempt: int, exception: BaseException) -> float:
    """0.05 s after every failed attempt: the ``low`` queue's, for tests that wait on retries."""
    return 0.05


RQUEUE: dict[str, Any] = {
    "REDIS_URL": os.environ.get("RQUEUE_TEST_REDIS_URL", "redis://127.0.0.1:6399/15"),
    "QUEUES": {"default": {}, "emails": {}, "low": {"backoff": quick_backoff}},
    # Fault-injection tests (tests/faults/) shrink these for their worker subprocesses.
    "LEASE": float(os.environ.get("RQUEUE_TEST_LEASE", "2")),
    "TIMEOUT_GRACE": float(os.environ.get("RQUEUE_TEST_TIMEOUT_GRACE", "5")),
}
# The periodic-job tests (tests/faults/test_schedule.py) hand their subprocesses a schedule.
if os.environ.get("RQUEUE_TEST_SCHEDULE"):
    RQUEUE["SCHEDULE"] = json.loads(os.environ["RQUEUE_TEST_SCHEDULE"])
# The Sentinel failover tests (tests/faults/test_sentinel_failover.py) hand their
# subprocesses the sentinels' [host, port] pairs (RQUEUE_TEST_REDIS_URL names the service).
if os.environ.get("RQUEUE_TEST_SENTINELS"):
    RQUEUE["SENTINELS"] = json.loads(os.environ["RQUEUE_TEST_SENTINELS"])
# RQUEUE_TEST_REDIS_URL names a node of a Redis Cluster (the redis_cluster fixture).
if os.environ.get("RQUEUE_TEST_REDIS_CLUSTER"):
    RQUEUE["REDIS_CLUSTER"] = True
# Tests of per-queue options hand their subprocesses more options, as JSON
# {queue: {option: value}} (group_concurrency in tests/management/commands/test_rqueue_work.py;
# a rate-limited queue of its own in tests/faults/test_rate_limit.py).
if os.environ.get("RQUEUE_TEST_QUEUE_OPTIONS"):
    for _queue, _options in json.loads(os.environ["RQUEUE_TEST_QUEUE_OPTIONS"]).items():
        RQUEUE["QUEUES"].setdefault(_queue, {}).update(_options)

# Encryption tests (tests/test_encryption.py) hand their worker subprocesses the keys (a JSON list).
if os.environ.get("RQUEUE_TEST_ENCRYPTION_KEYS"):
    RQUEUE["ENCRYPTION_KEYS"] = json.loads(os.environ["RQUEUE_TEST_ENCRYPTION_KEYS"])

# Middleware tests (tests/test_middleware.py) hand their worker subprocesses the classes.
if os.environ.get("RQUEUE_TEST_MIDDLEWARE"):
    RQUEUE["MIDDLEWARE"] = json.loads(os.environ["RQUEUE_TEST_MIDDLEWARE"])

# Sentry integration tests (tests/contrib/sentry/) have their worker subprocesses initialise
# sentry-sdk with a transport that writes envelopes to files in this folder.
if os.environ.get("RQUEUE_TEST_SENTRY_DIR"):
    from tests.contrib.sentry.recording import init_from_env

    init_from_env()

# django.tasks: the tasks of tests/jobs_app/tasks.py run as rqueue jobs. "default"
# may use every RQUEUE queue; "emails_only" only the "emails" queue; "immediate" is
# Django's, for a task a worker must refuse to run.
TASKS: dict[str, Any] = {
    "default": {"BACKEND": "django_rqueue.backends.RQueueBackend"},
    "emails_only": {"BACKEND": "django_rqueue.backends.RQueueBackend", "QUEUES": ["emails"]},
    "immediate": {"BACKEND": "django_rqueue.tasks_api.ImmediateBackend"},
}

LOGGING: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain"},
    },
    "root": {"handlers": ["console"], "level": "WARNING"},
    "loggers": {
        "django_rqueue": {"level": os.environ.get("RQUEUE_TEST_LOG_LEVEL", "INFO")},
    },
}
