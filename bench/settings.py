"""Django settings of the bench's django-rqueue side (DJANGO_SETTINGS_MODULE=bench.settings)."""

from __future__ import annotations

import os
from typing import Any

from bench import flow

SECRET_KEY = "django-rqueue-bench-not-a-secret"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
INSTALLED_APPS = ["django_rqueue", "bench"]
DATABASES: dict[str, Any] = {}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

RQUEUE: dict[str, Any] = {
    "REDIS_URL": os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0"),
    "KEY_PREFIX": "rqueue",
    "DEFAULT_QUEUE": "bench",
    "QUEUES": {"bench": {}, "scale1k": {}, "scale1m": {}, "groups": {}, **flow.QUEUE_OPTIONS},
}

TASKS: dict[str, Any] = {
    "default": {"BACKEND": "django_rqueue.backends.RQueueBackend", "QUEUES": ["bench"]},
}

LOGGING: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": "WARNING"},
    # The worker's default: one INFO line per job (bench output goes to a log file).
    "loggers": {"django_rqueue": {"level": "INFO"}},
}

# bench/cluster_spread.py: its queues, and a Redis Cluster behind BENCH_REDIS_URL.
for _queue in filter(None, os.environ.get("BENCH_QUEUES", "").split(",")):
    RQUEUE["QUEUES"][_queue] = {}
if os.environ.get("BENCH_REDIS_CLUSTER"):
    RQUEUE["REDIS_CLUSTER"] = True

# bench/regression.py's layers: what this process (and its worker children) runs with.
if os.environ.get("BENCH_LAYER", "none") == "middleware":
    RQUEUE["MIDDLEWARE"] = ["bench.middleware_cost.Noop"]
elif os.environ.get("BENCH_LAYER", "none") == "encryption":
    RQUEUE["ENCRYPTION_KEYS"] = [os.environ["BENCH_ENCRYPTION_KEY"]]  # made for one run
elif os.environ.get("BENCH_LAYER", "none") == "otel":
    RQUEUE["MIDDLEWARE"] = ["django_rqueue.contrib.opentelemetry.OpenTelemetryMiddleware"]
