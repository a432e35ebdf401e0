"""A plain :class:`~django_rqueue.worker.loop.Worker`'s lease thread after a short Redis outage.

(The supervised path, where the master renews, is
``test_a_job_running_across_an_outage_shorter_than_its_lease_keeps_it`` in
``test_redis_outage.py``.) After a failed renewal the thread must try again
soon, not a third of a lease later, or an outage shorter than the lease can
still cost the job its lease.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from pytest_django.fixtures import Settings as SettingsFixture

from django_rqueue.conf import get_config
from django_rqueue.engine.connection import get_client, reset_clients
from django_rqueue.engine.keys import QueueKeys
from django_rqueue.worker.lease import LeaseKeeper
from tests.jobs_app.jobs import record
from tests.support import transitions
from tests.support.redis_commands import hold
from tests.support.redis_server import RedisServer

from .harness import wait_until
from .proxy import FaultProxy

LEASE = 6.0  # renewals every 2 s


@pytest.fixture
def proxy(redis_server: RedisServer, settings: SettingsFixture) -> Iterator[FaultProxy]:
    """Route this process's django-rqueue clients through a proxy."""
    with FaultProxy(redis_server.port) as running:
        reset_clients()
        settings.RQUEUE = {**settings.RQUEUE, "REDIS_URL": running.url(), "LEASE": LEASE}
        try:
            yield running
        finally:
            reset_clients()


def test_lease_keeper_renews_soon_after_an_outage(
    proxy: FaultProxy, redis_client: redis.Redis, tmp_path: Path
) -> None:
    keys = QueueKeys.of(get_config().key_prefix, "default")
    record.delay(str(tmp_path / "ledger"), "x")
    reserved = transitions.reserve(
        get_client("default"), keys, lease_ms=int(LEASE * 1000), worker_id="test"
    )
    assert reserved is not None
    job_id, fields = reserved
    keeper = LeaseKeeper("default", job_id, int(fields[b"token"]), LEASE)

    def deadline() -> float:
        return redis_client.zscore(keys.reserved, job_id) or 0.0

    keeper.start()
    try:
        reserved_until = deadline()
        wait_until(lambda: deadline() > reserved_until, timeout=LEASE, interval=0.02)
        renewed_until = deadline()  # renewed just now: the next slot is in LEASE / 3

        proxy.set_mode("refuse")  # the next renewal (in 2 s) fails
        hold(LEASE / 3 + 0.5, keeper.is_alive, "the lease thread died")
        proxy.set_mode("pass")
        up = time.monotonic()

        wait_until(
            lambda: deadline() > renewed_until,
            timeout=LEASE / 3,
            interval=0.02,
            message="no renewal after the outage",
        )
        took = time.monotonic() - up
        print(f"renewed {took:.2f} s after Redis came back (next regular slot in 1.5 s)")
        assert took < 1.0, "the failed renewal waited for its next slot"
        assert not keeper.lost
    finally:
        keeper.done.set()
        keeper.join(timeout=5)
