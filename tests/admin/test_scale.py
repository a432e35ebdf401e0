"""100 000 failed jobs: the first page and "retry all" stay bounded.

Bounded means a fixed number of Redis round trips per page (not one per job)
and a peak of Python memory far below what loading every id would take.
Wall time is not asserted (it depends on the machine).
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import redis
from django.test import Client

from django_rqueue.ops import operations
from tests.support.jobs_in_state import Jobs

from .conftest import BASE

N = 100_000

#: Creates ARGV[1] failed jobs directly (one EVAL): hash + failed-store entry.
SEED = """
local base, n = KEYS[1], tonumber(ARGV[1])
local err = cjson.encode({type='builtins.ValueError', message='boom', traceback='Traceback ...'})
for i = 1, n do
  local id = 'default:' .. string.format('%022d', i)
  redis.call('HSET', base .. 'job:' .. id, 's', 'failed', 'n', (i % 10 == 0) and 'b' or 'a',
    'prio', '0', 'group', '', 'attempts', '1', 'max', '1',
    'p', '{"a":[],"k":{}}', 'token', '1', 'at', '1', 'finished_at', i,
    'error', err, 'nerr', '1', 'err:1', err)
  redis.call('ZADD', base .. 'failed', i, id)
end
return n
"""


@contextmanager
def measured() -> Iterator[dict[str, int]]:
    """Count round trips (packed sends on any connection) and the Python memory peak."""
    figures = {"round_trips": 0, "peak_bytes": 0}
    original: Callable[..., Any] = redis.connection.AbstractConnection.send_packed_command

    def counting(self: Any, command: Any, check_health: bool = True) -> None:
        figures["round_trips"] += 1
        original(self, command, check_health)

    redis.connection.AbstractConnection.send_packed_command = counting  # type: ignore[method-assign]
    tracemalloc.start()
    try:
        yield figures
    finally:
        figures["peak_bytes"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        redis.connection.AbstractConnection.send_packed_command = original  # type: ignore[method-assign]


@pytest.mark.slow
def test_100k_failed_jobs_first_page_and_retry_all_are_bounded(
    admin_client_rq: Client, rqueue_redis: redis.Redis
):
    jobs = Jobs(rqueue_redis)
    assert rqueue_redis.eval(SEED, 1, jobs.keys().base, N) == N
    admin_client_rq.get(BASE)  # warm up: session, templates, script cache
    jobs.failed(queue="low")  # and the script cache of "retry all", on another queue
    assert operations.process_failed("low", "retry").done == 1

    with measured() as page:
        response = admin_client_rq.get(f"{BASE}queues/default/failed/")
    assert response.status_code == 200
    assert response.context["page_obj"].paginator.count == N
    assert len(response.context["rows"]) == 50

    with measured() as last_page:
        response = admin_client_rq.get(f"{BASE}queues/default/failed/?page=2000")
    assert [r["id"] for r in response.context["rows"]][-1] == "default:" + "1".zfill(22)

    with measured() as filtered:
        response = admin_client_rq.get(f"{BASE}queues/default/failed/?name=b")
    assert len(response.context["rows"]) == 50

    with measured() as overview:
        response = admin_client_rq.get(BASE)
    assert response.status_code == 200

    with measured() as retry_all:
        result = operations.process_failed("default", "retry")
    assert result.done == N
    assert rqueue_redis.zcard(jobs.keys().failed) == 0
    assert rqueue_redis.llen(jobs.keys().group(0, "")) == N

    with measured() as queued_page:
        response = admin_client_rq.get(f"{BASE}queues/default/queued/")
    assert len(response.context["rows"]) == 50

    report = {
        "first page": page,
        "page 2000": last_page,
        "name filter": filtered,
        "overview": overview,
        "retry all": retry_all,
        "queued page": queued_page,
    }
    print("\n".join(f"{k}: {v}" for k, v in report.items()))
    for name in ("first page", "page 2000", "overview", "queued page"):
        assert report[name]["round_trips"] <= 15, (name, report[name])
    # The filter scans in chunks of 500 ids until it has a page (every 10th is "b").
    assert filtered["round_trips"] <= 12
    # One Lua call per batch of 500, one more that finds none left, and TIME: about 200.
    assert retry_all["round_trips"] <= N // operations.BATCH + 5
    # Loading every id alone would take ~9 MB of Python objects; no step comes close.
    for name, figures in report.items():
        assert figures["peak_bytes"] < 4_000_000, (name, figures)
