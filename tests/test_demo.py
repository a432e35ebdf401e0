"""``scripts/demo.sh`` in its normal mode: it keeps serving until Ctrl-C, then stops everything.

(``--smoke``, which stops by itself, is what CI runs after the test suite.)
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.support.processes import REPO, children_of
from tests.support.waiting import wait_until

ADMIN_LINE = re.compile(r"^\s+(http://127\.0\.0\.1:\d+/admin/django_rqueue/dashboard/)\s+login: ")


def status_of(url: str) -> int:
    """The HTTP status of ``url``, redirects not followed (``0``: nothing answers)."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: object, **kwargs: object) -> None:
            return None

    try:
        with urllib.request.build_opener(NoRedirect).open(url, timeout=5) as response:
            code: int = response.status
            return code
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def descendants(pid: int) -> set[int]:
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children_of(todo.pop()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow
def test_the_demo_serves_until_ctrl_c_then_stops_everything(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "RQUEUE_KEY_PREFIX")}
    # The tests' own virtualenv has everything the demo needs: no pip install here.
    env.update(RQUEUE_DEMO_VENV=sys.prefix, RQUEUE_DEMO_WORK=str(tmp_path / "demo"))
    out = tmp_path / "demo.out"
    with out.open("wb") as sink:
        demo = subprocess.Popen(
            ["bash", str(REPO / "scripts" / "demo.sh")],
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its group holds everything it starts
        )
    try:

        def admin_url() -> str:
            assert demo.poll() is None, out.read_text()
            text = out.read_text()
            found = [m.group(1) for line in text.splitlines() if (m := ADMIN_LINE.match(line))]
            return found[0] if found and "Press Ctrl-C" in text else ""

        url = wait_until(admin_url, timeout=110, interval=0.2, message="the demo's admin URL")
        assert out.read_text().count("login: admin / demo-admin-pass") == 1
        assert status_of(url) == 302  # to the login page: the site is up
        assert status_of(url.replace("/admin/django_rqueue/dashboard/", "/admin/login/")) == 200
        site_log = (tmp_path / "demo" / "site.log").read_text()
        assert demo.poll() is None  # still serving
        started = descendants(demo.pid)  # redis-server, runserver, the worker and its children
        assert len(started) >= 3, started

        os.kill(demo.pid, signal.SIGINT)
        assert demo.wait(timeout=60) == 0, out.read_text()
        wait_until(lambda: not group_alive(demo.pid), timeout=10, message="leftover processes")
        assert [pid for pid in started if alive(pid)] == []
        assert status_of(url) == 0  # nothing answers on the site's port any more
        text = out.read_text()
        assert "demo: stopped the site, the worker and Redis" in text
        assert "demo: FAILED" not in text and "(seed" not in text, text
        assert site_log
    finally:
        if demo.poll() is None or group_alive(demo.pid):
            os.killpg(demo.pid, signal.SIGKILL)
            demo.wait(timeout=10)
