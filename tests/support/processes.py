"""Run ``python -m django <command>`` as a real subprocess against the test Redis.

Both subprocess harnesses use it: the ``manage`` fixture of the command tests
(``tests/management/commands/conftest.py``) and the ``faults`` fixture of the
fault tests (``tests/faults/harness.py``). A command runs with
``DJANGO_SETTINGS_MODULE=tests.settings``, ``RQUEUE_TEST_REDIS_URL`` (exported by
the autouse ``rqueue_redis`` fixture, or given) and the repository root on
``PYTHONPATH``, each in its own session so that a stuck one can be killed with
its children. Output goes to files; at teardown every process still alive is
killed with its whole tree and all output is printed (pytest shows it when the
test failed).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: Seconds a freshly started command gets to import Django and reach Redis.
STARTUP = 20.0


def command_env(
    *, redis_url: str | None = None, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of a command: ours, plus the test settings and the repository."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "PYTHONUNBUFFERED": "1",
    }
    if redis_url:
        env["RQUEUE_TEST_REDIS_URL"] = redis_url
    assert env.get("RQUEUE_TEST_REDIS_URL"), "the rqueue_redis fixture exports it"
    env.update(extra or {})
    return env


def children_of(pid: int) -> list[int]:
    """Direct children of ``pid`` (``[]`` if it is gone)."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as f:
                found.extend(int(p) for p in f.read().split())
        except OSError:
            continue
    return found


def descendants_of(pid: int) -> list[int]:
    """Every descendant of ``pid``, breadth first."""
    found: list[int] = []
    todo = [pid]
    while todo:
        kids = children_of(todo.pop(0))
        found.extend(kids)
        todo.extend(kids)
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def kill_tree(pid: int, signum: int = signal.SIGKILL) -> None:
    """Send ``signum`` to ``pid`` and every descendant."""
    for target in [*descendants_of(pid), pid]:
        try:
            os.kill(target, signum)
        except ProcessLookupError:
            pass


class CommandProcess:
    """One ``python -m django <command>`` subprocess in its own session.

    ``env`` defaults to :func:`command_env`. ``.pid`` is the command's own
    process (a worker's master), ``.children()`` its direct children (from
    ``/proc/<pid>/task/*/children``), ``.descendants()`` all of them.
    """

    def __init__(
        self,
        workdir: Path,
        index: int,
        name: str,
        args: tuple[str, ...],
        env: dict[str, str] | None = None,
    ) -> None:
        self.name = name
        self.argv = [sys.executable, "-m", "django", name, *args]
        self.stdout_path = workdir / f"{index:02d}-{name}.stdout"
        self.stderr_path = workdir / f"{index:02d}-{name}.stderr"
        with self.stdout_path.open("wb") as out, self.stderr_path.open("wb") as err:
            self.proc = subprocess.Popen(
                self.argv,
                cwd=REPO,
                env=command_env() if env is None else env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
        #: Every pid ever seen as a child (for cleanup of orphans at teardown).
        self.seen: set[int] = set()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def children(self) -> list[int]:
        kids = children_of(self.pid)
        self.seen.update(kids)
        return kids

    def descendants(self) -> list[int]:
        found = descendants_of(self.pid)
        self.seen.update(found)
        return found

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal(self, signum: int) -> None:
        """Signal the command's own process only."""
        self.proc.send_signal(signum)

    def killpg(self, signum: int) -> None:
        """Signal its process group (a worker's children each have their own group)."""
        try:
            os.killpg(self.pid, signum)
        except ProcessLookupError:
            pass

    def wait(self, timeout: float) -> int:
        """Wait for the exit status; fail the test (with the output) if it takes longer."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"{self.name} (pid {self.pid}) still running after {timeout} s\n"
                f"--- stderr ---\n{self.stderr()[-6000:]}"
            ) from None

    def kill(self) -> None:
        """SIGKILL it, its whole tree, its process group and any child pid seen before."""
        if self.alive():
            self.descendants()
            kill_tree(self.pid)
            self.killpg(signal.SIGKILL)
        for pid in self.seen:
            if alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.proc.wait(timeout=10)

    def report(self) -> str:
        return (
            f"=== {' '.join(self.argv[3:])} (pid {self.pid}, rc {self.proc.returncode}) ===\n"
            f"--- stdout ---\n{self.stdout()}--- stderr ---\n{self.stderr()}"
        )


class Processes:
    """The commands one test started: numbered output files in ``workdir``, killed at the end."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.workdir.mkdir(exist_ok=True)
        self.started: list[CommandProcess] = []

    def start(self, name: str, *args: str, env: dict[str, str] | None = None) -> CommandProcess:
        """Start ``python -m django <name> <args>`` (``env``: see :class:`CommandProcess`)."""
        process = CommandProcess(self.workdir, len(self.started), name, args, env)
        self.started.append(process)
        return process

    def kill_all(self) -> None:
        for process in self.started:
            process.kill()

    def reports(self) -> str:
        return "\n".join(process.report() for process in self.started)
