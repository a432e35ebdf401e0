"""The job-function registry (django_rqueue.registry): names to functions, autodiscovery.

Each test works on an empty registry of its own; the suite's registry (every
``@job`` imported so far) is put back afterwards.
"""

from __future__ import annotations

import sys

import pytest
import redis

import tests.jobs_app
from django_rqueue import JobStatus, job, registry
from django_rqueue.worker.loop import Worker
from tests.jobs_app import jobs as suite_jobs  # imported (and registered) before any test

JOBS_MODULE = "tests.jobs_app.jobs"


@pytest.fixture(autouse=True)
def empty_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_registry", {})


def test_a_decorated_function_is_registered_under_its_name() -> None:
    def send(to: str) -> str:
        return to

    assert registry.get("tests.registry.send") is None
    registered = job(name="tests.registry.send")(send)

    assert registry.get("tests.registry.send") is registered
    assert registry.names() == ["tests.registry.send"]


def test_register_get_and_names() -> None:
    first = job(name="b.second")(lambda: None)
    second = job(name="a.first")(lambda: None)
    registry.register(first)  # registering the same function again changes nothing

    assert registry.get("b.second") is first and registry.get("a.first") is second
    assert registry.get("c.unknown") is None
    assert registry.names() == ["a.first", "b.second"]  # sorted


@pytest.mark.usefixtures("worker_may_close_db_connections")
def test_a_name_registered_twice_belongs_to_the_later_function(
    rqueue_redis: redis.Redis,
) -> None:
    ran: list[str] = []

    @job(name="tests.registry.twice")
    def earlier(tag: str) -> None:
        ran.append(f"earlier {tag}")

    @job(name="tests.registry.twice")
    def later(tag: str) -> None:
        ran.append(f"later {tag}")

    assert registry.get("tests.registry.twice") is later
    assert registry.names() == ["tests.registry.twice"]

    # A job enqueued through the earlier one is run by whichever holds the name.
    enqueued = earlier.delay("x")
    assert Worker(["default"], with_poller=False).work_once()
    assert ran == ["later x"]
    enqueued.refresh()
    assert enqueued.status is JobStatus.SUCCEEDED


def test_autodiscover_imports_the_jobs_module_of_each_installed_app(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Forget the module (restored after the test) so that autodiscovery imports it afresh.
    monkeypatch.delitem(sys.modules, JOBS_MODULE)
    monkeypatch.delattr(tests.jobs_app, "jobs")
    assert registry.names() == []

    registry.autodiscover()

    module = sys.modules[JOBS_MODULE]
    assert module is not suite_jobs  # imported again by autodiscover()
    assert registry.get(f"{JOBS_MODULE}.record") is module.record
    assert registry.get(f"{JOBS_MODULE}.fault_noop") is module.fault_noop
    assert all(name.startswith(f"{JOBS_MODULE}.") for name in registry.names())
    found = registry.names()
    registry.autodiscover()  # a second call imports nothing again
    assert registry.names() == found
