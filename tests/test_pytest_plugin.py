"""The pytest plugin (``django_rqueue.pytest_plugin``), run on small test files in a pytest
subprocess (``pytester``): inert until a fixture is named; ``rqueue_drain``,
``rqueue_capture`` and ``rqueue_private_redis`` when they are.

Each subprocess loads the plugin the way an installed django-rqueue does: through a
``pytest11`` entry point, read from this repository's ``pyproject.toml`` into a
``.dist-info`` directory on the subprocess's path.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

import pytest

from django_rqueue.testing import PrivateRedis, RedisServerNotFound, drain

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def plugin_installed(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """``pytester`` whose subprocesses find the ``pytest11`` entry points of ``pyproject.toml``
    (as ``pip install django-rqueue`` would register them), and this checkout first on their
    path."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    entry_points = project["entry-points"]["pytest11"]
    dist_info = pytester.path / "django_rqueue_under_test-0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: django-rqueue-under-test\nVersion: 0\n"
    )
    lines = "".join(f"{name} = {module}\n" for name, module in entry_points.items())
    (dist_info / "entry_points.txt").write_text(f"[pytest11]\n{lines}")
    paths = [str(pytester.path), str(REPO), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))
    return pytester


def test_the_entry_point_names_the_plugin_module() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"django_rqueue": "django_rqueue.pytest_plugin"}


def test_a_run_that_names_no_fixture_is_not_changed(plugin_installed: pytest.Pytester) -> None:
    # No Django settings and pytest-django left out: the plugin must load all the same, and
    # start, configure and import nothing of its own until a fixture is asked for.
    plugin_installed.makepyfile(
        test_plain="""
        import sys

        def test_plain(request):
            assert request.config.pluginmanager.get_plugin("django_rqueue") is not None
            from django.conf import settings
            assert not settings.configured
            for module in ("draining", "private_redis", "testing", "worker.loop"):
                assert f"django_rqueue.{module}" not in sys.modules, module
        """
    )
    result = plugin_installed.runpytest_subprocess("-p", "no:django", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)

    listed = plugin_installed.runpytest_subprocess("-p", "no:django", "--fixtures")
    listed.stdout.fnmatch_lines(
        ["rqueue_capture *", "rqueue_drain *", "rqueue_redis_server *", "rqueue_private_redis *"]
    )
    left_out = plugin_installed.runpytest_subprocess(
        "-p", "no:django", "-p", "no:django_rqueue", "--fixtures"
    )
    assert "rqueue_drain" not in left_out.stdout.str()


DRAIN_TESTS = """
import os
import time

import pytest
from django.conf import settings

from django_rqueue import JobStatus, get_job, job
from django_rqueue.testing import DrainError
from django_rqueue.workflows import WorkflowState, chord

ran = []


@job
def add(a, b):
    ran.append(("add", a, b))
    return a + b


@job
def total(values):
    return sum(values)


@job
async def add_later(a, b):
    ran.append(("add_later", a, b))
    return a + b


@job
def fan_out(n):
    for i in range(n):
        add.delay(i, i)


@job(max_attempts=1)
def explode(what):
    raise ValueError(f"boom: {what}")


@job(max_attempts=2, backoff=lambda attempt, exception: 0.0)
def flaky(key):
    attempts[key] = attempts.get(key, 0) + 1
    if attempts[key] == 1:
        raise ConnectionError("first attempt")
    return attempts[key]


attempts = {}


@job
def forever():
    forever.delay()


def test_a_first_private_redis(rqueue_private_redis, tmp_path_factory):
    assert settings.RQUEUE["REDIS_URL"] == rqueue_private_redis.url
    assert settings.RQUEUE["QUEUES"]  # the other keys are kept
    with rqueue_private_redis.client() as client:
        client.set("left-over", "1")
    pid_file = tmp_path_factory.getbasetemp() / "redis.pid"
    pid_file.write_text(str(rqueue_private_redis.pid))


def test_a_second_sees_the_same_server_emptied(rqueue_private_redis, tmp_path_factory):
    pid = int((tmp_path_factory.getbasetemp() / "redis.pid").read_text())
    assert rqueue_private_redis.pid == pid
    with rqueue_private_redis.client() as client:
        assert client.get("left-over") is None


def test_drain_runs_jobs_and_the_jobs_they_enqueue(rqueue_private_redis, rqueue_drain):
    ran.clear()
    fan_out.delay(3)
    add_later.delay(5, 5)
    # Not due before the first drain ends, however slow the host (it once took over 0.2 s).
    later = add.using(delay=3.0).delay(10, 10)
    assert later.status == JobStatus.SCHEDULED
    done = rqueue_drain()
    assert sorted(ran) == [("add", 0, 0), ("add", 1, 1), ("add", 2, 2), ("add_later", 5, 5)]
    assert done.attempts == 5 and not done.failed
    due = get_job(later.id).run_at
    time.sleep(max(0.0, due.timestamp() - time.time()) + 0.05)
    # The delay has passed: drain() now queues and runs the job.
    rqueue_drain()
    assert get_job(later.id).result == 20


def test_drain_runs_a_chord(rqueue_private_redis, rqueue_drain):
    workflow = chord([add.s(1, 2), add.s(3, 4)], total.s()).delay()
    rqueue_drain()
    workflow.refresh()
    assert workflow.state == WorkflowState.SUCCEEDED
    assert workflow.result == 10


def test_drain_raises_the_job_error(rqueue_private_redis, rqueue_drain):
    failing = explode.delay("x")
    add.delay(1, 1)
    with pytest.raises(ValueError, match="boom: x") as raised:
        rqueue_drain()
    assert any(entry.name == "explode" for entry in raised.traceback)
    assert f"({failing.id}) on queue 'default', attempt 1 of 1" in str(raised.value.__notes__)


def test_drain_may_list_errors_instead(rqueue_private_redis, rqueue_drain):
    explode.delay("y")
    done = rqueue_drain(raise_errors=False)
    [failure] = done.failed
    assert failure.final and str(failure.exception) == "boom: y"
    assert get_job(failure.job.id).status == JobStatus.FAILED


def test_drain_runs_a_retry_that_is_due(rqueue_private_redis, rqueue_drain):
    retried = flaky.delay("k")
    done = rqueue_drain(raise_errors=False)  # the retry is due at once: a second round runs it
    [failure] = done.failed
    assert not failure.final and isinstance(failure.exception, ConnectionError)
    assert [j.id for j in done.succeeded] == [retried.id]
    assert get_job(retried.id).result == 2


def test_drain_gives_up_on_queues_that_never_empty(rqueue_private_redis, rqueue_drain):
    forever.delay()
    with pytest.raises(DrainError, match="not empty after 5 attempts"):
        rqueue_drain(max_jobs=5)


def test_capture(rqueue_private_redis, rqueue_capture):
    queued = add.delay(1, 2)
    assert [(c.name, c.args) for c in rqueue_capture] == [("test_drain.add", [1, 2])]
    with rqueue_private_redis.client() as client:
        assert client.dbsize() == 0
    assert queued.status == JobStatus.QUEUED
"""

#: Writes whether the session's redis-server is still alive once the session ended.
SESSION_END = """
import os

import pytest


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    pid_file = session.config._tmp_path_factory.getbasetemp() / "redis.pid"
    pid = int(pid_file.read_text())
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        print(f"redis-server {pid} stopped")
    else:
        print(f"redis-server {pid} still running")
"""


@pytest.mark.slow
def test_drain_capture_and_the_private_redis(plugin_installed: pytest.Pytester) -> None:
    plugin_installed.makepyfile(test_drain=DRAIN_TESTS)
    plugin_installed.makeconftest(SESSION_END)
    result = plugin_installed.runpytest_subprocess(
        "--ds", "tests.settings", "-p", "no:cacheprovider", "-s"
    )
    result.assert_outcomes(passed=9)
    assert re.search(r"redis-server \d+ stopped", result.stdout.str())


def test_without_redis_server_the_tests_that_want_it_error(
    plugin_installed: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(plugin_installed.mkdir("empty")))
    plugin_installed.makepyfile(
        test_no_server="""
        def test_wants_it(rqueue_private_redis):
            pass

        def test_does_not(rqueue_drain):
            pass
        """
    )
    result = plugin_installed.runpytest_subprocess(
        "--ds", "tests.settings", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*rqueue_redis_server: redis-server not found on PATH*"])


def test_private_redis_names_a_missing_executable() -> None:
    with pytest.raises(RedisServerNotFound, match="no-such-redis-server not found"):
        PrivateRedis("no-such-redis-server")


def test_drain_refuses_bad_arguments(rqueue_redis: object) -> None:
    with pytest.raises(ValueError, match="max_jobs must be >= 1"):
        drain(max_jobs=0)
    with pytest.raises(ValueError, match="nowhere"):
        drain(["nowhere"])
