"""Runs ``rqueue_work`` in a fresh child process and restarts it when a Python file changes
(``rqueue_work --reload``, development only).

The reloader is a parent that stays up, as procrastinate's hot reload and
Django's ``runserver`` are: it starts the same command line again
(``sys.orig_argv``) with :data:`RELOADED_ENV` set, so the child runs the worker
itself, in a fresh interpreter that imports the changed code (a worker restarted
in the same interpreter keeps the old modules: python-arq/arq#429). Changes come
from ``watchfiles`` (the ``reload`` extra), ``.py`` files only (its
``PythonFilter``), under the watched directories, leaving out virtualenvs, caches
and VCS folders (:data:`IGNORED_DIRS`).

On a change the worker is stopped as a SIGTERM stops it (running jobs get
``--shutdown-timeout`` seconds, then are handed back), SIGKILLed if it is still
there :data:`STOP_MARGIN` seconds later, and started again. The worker runs in a
process group of its own and gets SIGTERM if the reloader dies
(:func:`follow_reloader`); a SIGTERM/SIGINT to the reloader (Ctrl-C) is
passed on once per signal, so the second one stops the worker at once, as it
does without ``--reload``. When the worker exits on its own (a stop, a crash at
startup), the reloader exits with its status.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import FrameType

from django.conf import settings
from django.core.management.base import CommandError

from ..master.process import set_pdeathsig

logger = logging.getLogger("django_rqueue.reload")

#: Environment variable set in the worker the reloader starts (to the reloader's pid): that
#: process runs the worker (:func:`follow_reloader`).
RELOADED_ENV = "RQUEUE_RELOADED"
#: Seconds beyond ``--shutdown-timeout`` the reloader waits for a stopped worker before
#: SIGKILLing its process group.
STOP_MARGIN = 5.0
#: Directories never watched (on top of ``watchfiles``' own list: ``.venv``,
#: ``__pycache__``, ``.git``, ``node_modules``, ``.tox``, ...).
IGNORED_DIRS = ("venv", "env", "site-packages", ".nox", ".ruff_cache", "build", "dist")
#: Milliseconds between two looks at the worker while no file changes.
POLL_MS = 200


def reloaded() -> bool:
    """Whether this process is a worker started by a reloader (:data:`RELOADED_ENV`)."""
    return bool(os.environ.get(RELOADED_ENV))


def follow_reloader() -> None:
    """In a worker started by a reloader: get SIGTERM when the reloader dies
    (``PR_SET_PDEATHSIG``, Linux), and exit at once if it is already gone."""
    set_pdeathsig(signal.SIGTERM)
    if str(os.getppid()) != os.environ.get(RELOADED_ENV):
        raise SystemExit(1)


def watched_dirs(given: Sequence[str] | None) -> list[Path]:
    """The directories to watch: ``given`` (``--reload-dir``), else the project's
    ``settings.BASE_DIR`` when it is set, else the current directory.

    Raises:
        CommandError: a given directory does not exist.
    """
    if given:
        dirs = [Path(d).resolve() for d in given]
        missing = [str(d) for d in dirs if not d.is_dir()]
        if missing:
            raise CommandError(f"--reload-dir: no such directory: {', '.join(missing)}")
        return dirs
    base = getattr(settings, "BASE_DIR", None)
    return [Path(base).resolve() if base else Path.cwd()]


def source_filter() -> Callable[..., bool]:
    """``watchfiles``' ``PythonFilter`` (``.py``, ``.pyx``, ``.pyd`` files) without
    :data:`IGNORED_DIRS`: called with a ``watchfiles.Change`` and a path, true to keep it.

    Raises:
        CommandError: ``watchfiles`` is not installed (the ``reload`` extra).
    """
    try:
        from watchfiles import PythonFilter
    except ImportError:
        raise CommandError(
            "--reload needs watchfiles: pip install 'django-rqueue[reload]'"
        ) from None

    class SourceFilter(PythonFilter):
        ignore_dirs = (*PythonFilter.ignore_dirs, *IGNORED_DIRS)

    return SourceFilter()


def describe(changes: Iterable[tuple[object, str]]) -> str:
    """The changed files of ``watchfiles``' ``(change, path)`` pairs, relative to the current
    directory when under it, sorted, comma-separated."""
    cwd = Path.cwd()
    names = set()
    for _, path in changes:
        file = Path(path)
        names.add(str(file.relative_to(cwd)) if file.is_relative_to(cwd) else str(file))
    return ", ".join(sorted(names))


class Reloader:
    """Run the worker command (``argv``, default ``sys.orig_argv``) in a child process, restart
    it when a ``.py`` file under ``dirs`` changes; ``shutdown_timeout`` (seconds): the worker's
    ``--shutdown-timeout``."""

    def __init__(
        self,
        dirs: Sequence[Path],
        *,
        shutdown_timeout: float,
        argv: Sequence[str] | None = None,
    ) -> None:
        self.dirs = list(dirs)
        self.shutdown_timeout = shutdown_timeout
        self.argv = [sys.executable, *(sys.orig_argv if argv is None else argv)[1:]]
        self.worker: subprocess.Popen[bytes] | None = None
        #: Set by a SIGTERM/SIGINT to the reloader: no more restarts.
        self.stopping = threading.Event()

    def start(self) -> subprocess.Popen[bytes]:
        """Start the worker: the same command, marked as the reloaded one (:data:`RELOADED_ENV`)."""
        self.worker = subprocess.Popen(  # noqa: S603 - our own command line
            self.argv,
            env={**os.environ, RELOADED_ENV: str(os.getpid())},
            process_group=0,
        )
        logger.info("rqueue_work --reload: worker started (pid %d)", self.worker.pid)
        return self.worker

    def stop(self, worker: subprocess.Popen[bytes]) -> None:
        """Stop ``worker`` as SIGTERM does; SIGKILL its process group if it outlives
        ``shutdown_timeout + STOP_MARGIN`` seconds."""
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(self.shutdown_timeout + STOP_MARGIN)
        except subprocess.TimeoutExpired:
            logger.error("rqueue_work --reload: worker %d did not stop; killing it", worker.pid)
            try:
                os.killpg(worker.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            worker.wait()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.stopping.set()
        if self.worker is not None and self.worker.poll() is None:
            self.worker.send_signal(signum)

    def run(self) -> int:
        """Watch and restart until the worker exits on its own; return its exit status.

        Raises:
            CommandError: ``watchfiles`` is not installed (the ``reload`` extra).
        """
        watch_filter = source_filter()
        from watchfiles import watch

        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._on_signal)
        logger.info(
            "rqueue_work --reload: watching %s for changes to Python files (development only)",
            ", ".join(map(str, self.dirs)),
        )
        worker = self.start()
        for changes in watch(
            *self.dirs,
            watch_filter=watch_filter,
            rust_timeout=POLL_MS,
            yield_on_timeout=True,
            raise_interrupt=False,
        ):
            if worker.poll() is not None:
                break
            if changes and not self.stopping.is_set():
                logger.warning(
                    "rqueue_work --reload: %s changed; restarting the worker", describe(changes)
                )
                self.stop(worker)
                if self.stopping.is_set():  # a signal came during the stop
                    break
                worker = self.start()
        code = worker.wait()
        logger.info("rqueue_work --reload: worker exited (status %d)", code)
        return code
