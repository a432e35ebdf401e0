"""Run ``python -m django <command>`` as a real subprocess against the test Redis.

The ``manage`` fixture (``tests/management/commands/conftest.py``) starts commands with
``DJANGO_SETTINGS_MODULE=tests.settings``, ``RQUEUE_TEST_REDIS_URL`` (exported by
the autouse ``rqueue_redis`` fixture) and the repository root on ``PYTHONPATH``,
each in its own session so that a stuck one can be killed with its children.
Output goes to files; at teardown every process still alive is killed and all
output is printed (pytest shows it when the test failed).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


class ManagedCommand:
    """One ``manage.py``-style command running in a subprocess."""

    def __init__(self, workdir: Path, index: int, name: str, args: tuple[str, ...]) -> None:
        self.name = name
        self.argv = [sys.executable, "-m", "django", name, *args]
        self.stdout_path = workdir / f"{index:02d}-{name}.stdout"
        self.stderr_path = workdir / f"{index:02d}-{name}.stderr"
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "PYTHONPATH": os.pathsep.join(
                [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
            ),
            "PYTHONUNBUFFERED": "1",
        }
        assert env.get("RQUEUE_TEST_REDIS_URL"), "the rqueue_redis fixture exports it"
        with self.stdout_path.open("wb") as out, self.stderr_path.open("wb") as err:
            self.proc = subprocess.Popen(
                self.argv,
                cwd=REPO,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def wait(self, timeout: float) -> int:
        """Wait for the exit status; fail the test (with the output) if it takes longer."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"{self.name} (pid {self.pid}) still running after {timeout} s\n"
                f"--- stderr ---\n{self.stderr()}"
            ) from None

    def kill(self) -> None:
        if self.alive():
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=10)

    def report(self) -> str:
        return (
            f"=== {' '.join(self.argv[2:])} (pid {self.pid}, rc {self.proc.returncode}) ===\n"
            f"--- stdout ---\n{self.stdout()}--- stderr ---\n{self.stderr()}"
        )


type Manage = Callable[..., ManagedCommand]
