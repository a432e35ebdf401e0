"""A Redis client for the demo's own bookkeeping (run order, attempt counters).

It reuses the Redis of ``RQUEUE["REDIS_URL"]`` and namespaces its keys under
``<KEY_PREFIX>:demo:`` so that they never collide with django-rqueue's own.
"""

from functools import cache

import redis
from django.conf import settings


@cache
def redis_client() -> redis.Redis:
    """The demo's Redis client (one per process)."""
    return redis.Redis.from_url(settings.RQUEUE["REDIS_URL"], decode_responses=True)


def demo_key(name: str) -> str:
    """``<KEY_PREFIX>:demo:<name>``."""
    prefix = settings.RQUEUE.get("KEY_PREFIX", "rqueue")
    return f"{prefix}:demo:{name}"


#: List of ``"<user> <n>"`` entries, appended by each report job as it runs.
REPORT_ORDER = "report-order"
