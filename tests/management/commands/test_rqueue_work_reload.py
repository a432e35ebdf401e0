"""``rqueue_work --reload``: a real reloader restarting a real worker on a change of a ``.py`` file.

The worker's master writes ``worker_process_init`` / ``worker_process_shutdown`` lines
(``RQUEUE_TEST_PROCESS_LEDGER``, receivers in ``tests/jobs_app/jobs.py``): a new
master pid after a change is the fresh process; the reloader is the command itself.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
import redis
from django.core.management import call_command
from django.core.management.base import CommandError
from watchfiles import Change

from django_rqueue.management.reloader import describe, source_filter, watched_dirs
from tests.jobs_app.jobs import read_ledger
from tests.support.processes import STARTUP, CommandProcess, alive, command_env
from tests.support.waiting import wait_until

from .conftest import Manage


def masters(ledger: str, event: str) -> list[dict[str, Any]]:
    return [e for e in read_ledger(ledger) if e["tag"] == "master" and e["event"] == event]


def start(manage: Manage, tmp_path: Path, *args: str) -> tuple[CommandProcess, str, Path]:
    source = tmp_path / "src"
    source.mkdir()
    processes = str(tmp_path / "processes.jsonl")
    env = command_env(extra={"RQUEUE_TEST_PROCESS_LEDGER": processes})
    reloader = manage(
        "rqueue_work",
        "--reload",
        "--reload-dir",
        str(source),
        "--concurrency",
        "1",
        "--shutdown-timeout",
        "2",
        *args,
        env=env,
    )
    wait_until(
        lambda: masters(processes, "init") or not reloader.alive(),
        timeout=STARTUP,
        message="the worker did not start",
    )
    assert reloader.alive(), reloader.report()
    return reloader, processes, source


@pytest.mark.slow
def test_a_changed_py_file_restarts_the_worker_in_a_fresh_process(
    manage: Manage, tmp_path: Path, rqueue_redis: redis.Redis
) -> None:
    reloader, processes, source = start(manage, tmp_path)
    [first] = masters(processes, "init")
    assert first["ppid"] == reloader.pid  # the worker's master is the reloader's child
    # Ignored: not Python, a cache, a virtualenv. Written first: a watcher that did not ignore
    # them would report them before (or with) the .py file below.
    (source / "notes.txt").write_text("x")
    (source / "__pycache__").mkdir()
    (source / "__pycache__" / "cached.py").write_text("x = 1\n")
    (source / "venv").mkdir()
    (source / "venv" / "lib.py").write_text("x = 1\n")
    (source / "tasks.py").write_text("x = 1\n")

    second = wait_until(
        lambda: [e for e in masters(processes, "init") if e["pid"] != first["pid"]],
        timeout=20,
        message="the worker was not restarted",
    )[0]
    assert second["ppid"] == reloader.pid
    # The old master stopped cleanly (its shutdown signal, exit code 0) before the new one.
    [old_down] = masters(processes, "shutdown")
    assert old_down["pid"] == first["pid"] and old_down["exitcode"] == 0
    assert old_down["t"] < second["t"]
    log = reloader.stderr()
    assert f"{source / 'tasks.py'} changed; restarting the worker" in log
    assert log.count("restarting the worker") == 1
    assert "notes.txt" not in log and "cached.py" not in log and "lib.py" not in log

    reloader.signal(signal.SIGTERM)  # passed on to the worker, which stops cleanly
    assert reloader.wait(20) == 0, reloader.report()
    assert [e["pid"] for e in masters(processes, "shutdown")] == [first["pid"], second["pid"]]


@pytest.mark.slow
def test_the_reloader_exits_when_the_worker_exits_on_its_own(
    manage: Manage, tmp_path: Path, rqueue_redis: redis.Redis
) -> None:
    reloader, processes, _ = start(manage, tmp_path)
    [master] = masters(processes, "init")
    os.kill(master["pid"], signal.SIGTERM)  # the worker itself, not the reloader
    assert reloader.wait(20) == 0, reloader.report()
    assert "worker exited (status 0)" in reloader.stderr()
    assert "restarting" not in reloader.stderr()


@pytest.mark.slow
def test_a_worker_whose_reloader_dies_stops_cleanly(
    manage: Manage, tmp_path: Path, rqueue_redis: redis.Redis
) -> None:
    reloader, processes, _ = start(manage, tmp_path)
    [master] = masters(processes, "init")
    reloader.signal(signal.SIGKILL)  # the reloader only: its worker is in a group of its own
    reloader.wait(5)
    [down] = wait_until(
        lambda: masters(processes, "shutdown"), timeout=20, message="the worker did not stop"
    )
    assert down["pid"] == master["pid"] and down["exitcode"] == 0
    wait_until(lambda: not alive(master["pid"]), timeout=10, message="the worker is still there")


@pytest.mark.slow
def test_the_reloader_exits_with_the_status_of_a_worker_that_cannot_start(
    manage: Manage, tmp_path: Path, rqueue_redis: redis.Redis
) -> None:
    reloader = manage("rqueue_work", "--reload", "--reload-dir", str(tmp_path), "--queues", "nope")
    assert reloader.wait(STARTUP) == 1, reloader.report()
    assert "nope" in reloader.stderr() and "worker exited (status 1)" in reloader.stderr()


def test_reload_is_refused_with_burst() -> None:
    with pytest.raises(CommandError, match="--reload and --burst"):
        call_command("rqueue_work", "--reload", "--burst")


def test_reload_without_watchfiles_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "watchfiles", None)  # as if not installed: import fails
    with pytest.raises(CommandError, match=r"pip install 'django-rqueue\[reload\]'"):
        call_command("rqueue_work", "--reload")


def test_reload_dir_must_exist(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="no such directory"):
        call_command("rqueue_work", "--reload", "--reload-dir", str(tmp_path / "missing"))


def test_the_watched_directory_is_base_dir_else_the_current_one(
    settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    settings.BASE_DIR = tmp_path / "project"
    assert watched_dirs(None) == [(tmp_path / "project").resolve()]
    del settings.BASE_DIR
    assert watched_dirs(None) == [tmp_path.resolve()]
    assert watched_dirs([str(tmp_path)]) == [tmp_path.resolve()]


def test_the_filter_keeps_python_files_and_leaves_out_caches_and_virtualenvs() -> None:
    keep = source_filter()
    assert keep(Change.modified, "/p/app/jobs.py")
    for ignored in (
        "/p/app/notes.txt",
        "/p/app/__pycache__/jobs.py",
        "/p/app/jobs.pyc",
        "/p/venv/lib/x.py",
        "/p/.venv/lib/x.py",
        "/p/lib/site-packages/x.py",
        "/p/.git/x.py",
    ):
        assert not keep(Change.modified, ignored), ignored
    assert describe({(Change.added, "/b.py"), (Change.modified, "/a.py")}) == "/a.py, /b.py"
