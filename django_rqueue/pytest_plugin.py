"""The pytest plugin: fixtures over :mod:`django_rqueue.testing`, inert until a test asks for one.

Installing django-rqueue registers this module under the ``pytest11`` entry point
``django_rqueue``, as pytest-django registers its own. It defines fixtures only: no hook, no
``autouse`` fixture, and it imports nothing more until a fixture is used, so a test run that
requests none of them is not changed. A test opts in by naming a fixture:

- ``rqueue_capture``: :func:`~django_rqueue.testing.capture_jobs` around the test;
- ``rqueue_drain``: :func:`~django_rqueue.testing.drain`, to call in the test;
- ``rqueue_private_redis``: a private ``redis-server`` for the test session
  (:class:`~django_rqueue.testing.PrivateRedis`, started on first use, stopped at the end of
  the session), emptied before the test, with ``RQUEUE["REDIS_URL"]`` pointed at it for the
  test (``override_settings``).

``pytest -p no:django_rqueue`` leaves the plugin out; where plugins are not auto-loaded
(``PYTEST_DISABLE_PLUGIN_AUTOLOAD``), ``-p django_rqueue.pytest_plugin`` or
``pytest_plugins = ["django_rqueue.pytest_plugin"]`` in the root ``conftest.py`` loads it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .draining import Drained
    from .private_redis import PrivateRedis
    from .testing import CapturedJobs

__all__ = ["rqueue_capture", "rqueue_drain", "rqueue_private_redis", "rqueue_redis_server"]


@pytest.fixture
def rqueue_capture() -> Iterator[CapturedJobs]:
    """The test runs inside ``capture_jobs()``: its ``.delay()`` calls are recorded in the
    :class:`~django_rqueue.testing.CapturedJobs` this yields, not sent."""
    from .testing import capture_jobs

    with capture_jobs() as captured:
        yield captured


@pytest.fixture
def rqueue_drain() -> Callable[..., Drained]:
    """:func:`~django_rqueue.testing.drain`: call it to run the queued jobs in the test's
    process until the queues are empty (a job's exception is raised in the test)."""
    from .draining import drain

    return drain


@pytest.fixture(scope="session")
def rqueue_redis_server() -> Iterator[PrivateRedis]:
    """A private ``redis-server`` for the whole session (of this process: each pytest-xdist
    worker has its own), started when a test first asks for it, stopped at the end.

    Fails the tests that use it, with the reason, when ``redis-server`` is not installed or
    does not start.
    """
    from .engine.connection import reset_clients
    from .private_redis import PrivateRedis, RedisServerNotFound

    try:
        server = PrivateRedis().start()
    except (RedisServerNotFound, RuntimeError) as exc:
        pytest.fail(f"rqueue_redis_server: {exc}", pytrace=False)
    try:
        yield server
    finally:
        server.stop()
        reset_clients()  # no cached client of a server that is gone


@pytest.fixture
def rqueue_private_redis(rqueue_redis_server: PrivateRedis) -> Iterator[PrivateRedis]:
    """The session's private Redis, emptied (``FLUSHALL``), with ``RQUEUE["REDIS_URL"]``
    pointed at it for the test; the other ``RQUEUE`` keys are kept (a queue with a
    ``REDIS_URL`` of its own keeps that one)."""
    from django.conf import settings
    from django.test import override_settings

    rqueue_redis_server.flush()
    rqueue = {**getattr(settings, "RQUEUE", {}), "REDIS_URL": rqueue_redis_server.url}
    with override_settings(RQUEUE=rqueue):
        yield rqueue_redis_server
