"""Shared fixtures: one private redis-server per test session, flushed before every test.

The helpers behind them live in ``tests/support/``. With ``RQUEUE_TEST_ACL=1``,
django-rqueue (in the test process and in worker subprocesses) connects as a
least-privilege ACL user and a test fails if Redis refused that user anything
(:mod:`tests.support.redis_acl`).
"""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from pytest_django import DjangoDbBlocker
from pytest_django.fixtures import Settings as SettingsFixture

from django_rqueue import signals
from django_rqueue.engine.connection import reset_clients
from tests.support import redis_acl
from tests.support.jobs_in_state import Jobs
from tests.support.redis_cluster import LocalCluster
from tests.support.redis_sentinel import SentinelSet
from tests.support.redis_server import RedisServer

#: One signal sent: ``(signal name, sender, kwargs without "signal")`` (the ``events`` fixture).
type Event = tuple[str, object, dict[str, Any]]


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """A private redis-server on a free 127.0.0.1 port for the whole session."""
    server = RedisServer(redis_acl.server_args()).start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def other_redis_server_session() -> Iterator[RedisServer]:
    """A second private redis-server for the whole session (started on first use)."""
    server = RedisServer(redis_acl.server_args()).start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def other_redis_server(
    other_redis_server_session: RedisServer, settings: SettingsFixture
) -> RedisServer:
    """The session's second redis-server, running and emptied, with ``RQUEUE``'s queue
    ``emails`` on it (its own ``REDIS_URL``); ``default`` stays on the session server."""
    if not other_redis_server_session.ping():  # a previous test stopped it
        other_redis_server_session.restart()
    url = other_redis_server_session.url
    with other_redis_server_session.client() as client:
        client.flushall()
        if redis_acl.enabled():
            redis_acl.create_user(client)
            url = redis_acl.as_acl_user(url)
    queues = dict(settings.RQUEUE.get("QUEUES", {}))
    queues["emails"] = {**queues.get("emails", {}), "REDIS_URL": url}
    settings.RQUEUE = {**settings.RQUEUE, "QUEUES": queues}
    return other_redis_server_session


@pytest.fixture(scope="session")
def redis_cluster_session() -> Iterator[LocalCluster]:
    """A private Redis Cluster of three masters for the whole session (started on first use)."""
    with LocalCluster() as cluster:
        yield cluster


@pytest.fixture
def redis_cluster(
    redis_cluster_session: LocalCluster,
    settings: SettingsFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[LocalCluster]:
    """The session's Redis Cluster, emptied, with ``RQUEUE`` pointed at it (``REDIS_CLUSTER``);
    the slots a test moves are moved back after it.

    Cached clients are dropped before and after, so ``get_client()`` reaches the
    cluster during the test and the session server after it. Worker
    subprocesses started by the test use it too (``RQUEUE_TEST_REDIS_CLUSTER``,
    read by ``tests/settings.py``).
    """
    redis_cluster_session.flush()
    url = redis_cluster_session.url
    if redis_acl.enabled():
        for node in redis_cluster_session.nodes:
            with node.client() as client:
                redis_acl.create_user(client, cluster=True)
        url = redis_acl.as_acl_user(url)
    settings.RQUEUE = {**settings.RQUEUE, "REDIS_URL": url, "REDIS_CLUSTER": True}
    monkeypatch.setenv("RQUEUE_TEST_REDIS_URL", url)
    monkeypatch.setenv("RQUEUE_TEST_REDIS_CLUSTER", "1")
    reset_clients()
    try:
        yield redis_cluster_session
    finally:
        reset_clients()
        redis_cluster_session.restore_slots()


@pytest.fixture
def sentinel_set() -> Iterator[SentinelSet]:
    """A fresh master, replica and three sentinels (:mod:`tests.support.redis_sentinel`),
    stopped after the test; the test points ``RQUEUE`` at it if it wants to."""
    with SentinelSet().start() as deployment:
        yield deployment
    reset_clients()  # no cached client of its master outlives it


@pytest.fixture(autouse=True)
def rqueue_redis(
    redis_server: RedisServer,
    settings: SettingsFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[redis.Redis]:
    """Point django-rqueue at the session server, emptied, and yield a client to it.

    Also exports ``RQUEUE_TEST_REDIS_URL`` so worker subprocesses started by a
    test (which load ``tests.settings``) use the same server.
    """
    if not redis_server.ping():  # a previous test crashed or stopped it
        redis_server.restart()
    client = redis_server.client()
    client.flushall()
    url = redis_server.url
    if redis_acl.enabled():
        redis_acl.create_user(client)
        url = redis_acl.as_acl_user(url)
    settings.RQUEUE = {**settings.RQUEUE, "REDIS_URL": url}
    monkeypatch.setenv("RQUEUE_TEST_REDIS_URL", url)
    try:
        yield client
        if redis_acl.enabled() and redis_server.ping():
            refused = redis_acl.refusals(client)
            assert not refused, f"Redis refused the least-privilege user: {refused}"
    finally:
        client.close()


@pytest.fixture
def redis_client(rqueue_redis: redis.Redis) -> redis.Redis:
    """A ``redis.Redis`` client (db 0) connected to the per-session test server."""
    return rqueue_redis


@pytest.fixture
def jobs(rqueue_redis: redis.Redis) -> Jobs:
    """Puts jobs in any state on a queue through the real transitions."""
    return Jobs(rqueue_redis)


@pytest.fixture
def worker_may_close_db_connections(django_db_blocker: DjangoDbBlocker) -> Iterator[None]:
    """Let an in-process worker call ``close_old_connections()`` around each job, as real ones do.

    That touches Django's connection once an earlier test has opened it, which
    pytest-django would otherwise refuse outside ``django_db`` tests. Modules
    that run workers in-process use it with ``pytest.mark.usefixtures``.
    """
    with django_db_blocker.unblock():
        yield


@pytest.fixture
def ledger(tmp_path: Path) -> str:
    """Path of an out-of-Redis ledger file the test jobs append JSON lines to."""
    return str(tmp_path / "ledger.jsonl")


@pytest.fixture
def events() -> Iterator[list[Event]]:
    """Every job signal sent during the test: ``(name, sender, kwargs without "signal")``."""
    seen: list[Event] = []
    receivers = []
    for name in ("job_enqueued", "job_started", "job_succeeded", "job_retrying", "job_failed"):
        sig = getattr(signals, name)

        def receiver(sender: object, _name: str = name, **kwargs: Any) -> None:
            kwargs.pop("signal")
            seen.append((_name, sender, kwargs))

        sig.connect(receiver, weak=False)
        receivers.append((sig, receiver))
    try:
        yield seen
    finally:
        for sig, receiver in receivers:
            sig.disconnect(receiver)
