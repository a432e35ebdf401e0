"""A private, throw-away ``redis-server`` process for tests.

Usage::

    server = RedisServer().start()
    client = server.client()
    ...
    server.kill9()      # simulate a crash
    server.restart()    # same argv, port and data dir
    server.close()      # stop + remove the temp dir (also done at interpreter exit)

Each server binds 127.0.0.1 on a free port, keeps no RDB/AOF, and logs to
``<tmpdir>/redis.log``. Servers are registered with :mod:`atexit`, and on Linux
the child also gets ``PR_SET_PDEATHSIG`` (the worker's own
:func:`~django_rqueue.master.process.set_pdeathsig`) so it dies with the test
process even when that process is SIGKILLed.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from django_rqueue.master.process import set_pdeathsig

STARTUP_TIMEOUT = 5.0
STOP_TIMEOUT = 5.0
LAUNCH_ATTEMPTS = 5
_POLL_INTERVAL = 0.01

#: Pass as ``client(retry=NO_RETRY)`` for a client that fails fast on a dead server.
NO_RETRY = Retry(NoBackoff(), 0)

_live_servers: weakref.WeakSet[RedisServer] = weakref.WeakSet()
_live_lock = threading.Lock()


class RedisServerError(RuntimeError):
    """The redis-server process could not be started."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class RedisServer:
    """One redis-server child process on 127.0.0.1:<free port>."""

    def __init__(
        self,
        extra_args: Sequence[str] = (),
        *,
        executable: str | None = None,
        startup_timeout: float = STARTUP_TIMEOUT,
        port_picker: Callable[[], int] | None = None,
    ) -> None:
        found = executable or shutil.which("redis-server")
        if not found:
            raise RedisServerError(
                "redis-server not found on PATH; run scripts/bootstrap.sh "
                "(or apt-get install redis-server)"
            )
        self.executable: str = found
        self.extra_args: list[str] = list(extra_args)
        self.startup_timeout = startup_timeout
        #: Returns a free port to try (a cluster node needs its bus port, +10000, free too).
        self.port_picker = port_picker or free_port
        self.dir = Path(tempfile.mkdtemp(prefix="rqueue-redis-"))
        self.logfile = self.dir / "redis.log"
        self.port: int = 0
        self._argv: list[str] = []
        self._proc: subprocess.Popen[bytes] | None = None
        self._closed = False
        with _live_lock:
            _live_servers.add(self)

    # -- public API ---------------------------------------------------------

    @property
    def url(self) -> str:
        return self.url_for_db(0)

    def url_for_db(self, db: int) -> str:
        self._require_port()
        return f"redis://127.0.0.1:{self.port}/{db}"

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise RedisServerError("redis-server has not been started")
        return self._proc.pid

    def client(self, db: int = 0, **kwargs: Any) -> redis.Redis:
        """Return a new ``redis.Redis`` client for this server (caller closes it).

        It keeps redis-py's default retry policy (redis-py >= 6 retries a failed
        command 3 times with exponential backoff, i.e. seconds), so a command to
        a dead server is slow to fail; pass ``retry=NO_RETRY`` to fail at once.
        """
        self._require_port()
        options: dict[str, Any] = {"socket_timeout": 10, "socket_connect_timeout": 2}
        options.update(kwargs)
        return redis.Redis(host="127.0.0.1", port=self.port, db=db, **options)

    def start(self) -> Self:
        """Launch on a fresh free port, retrying if the port gets taken meanwhile."""
        if self._closed:
            raise RedisServerError("server was closed")
        if self.is_alive():
            return self
        errors: list[str] = []
        for _attempt in range(LAUNCH_ATTEMPTS):
            self.port = self.port_picker()
            self._argv = self._build_argv(self.port)
            try:
                self._launch()
                return self
            except RedisServerError as exc:
                errors.append(str(exc))
                if "Address already in use" not in str(exc):
                    raise
        raise RedisServerError(
            f"could not start redis-server after {LAUNCH_ATTEMPTS} attempts:\n" + "\n".join(errors)
        )

    def restart(self) -> Self:
        """Stop (if running) and relaunch with the same argv, port and data dir."""
        if not self._argv:
            return self.start()
        self.stop()
        self._launch()
        return self

    def stop(self) -> None:
        """SHUTDOWN NOSAVE; SIGKILL if it is still alive after STOP_TIMEOUT; reap."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            try:
                with self.client(socket_timeout=STOP_TIMEOUT, retry=NO_RETRY) as conn:
                    conn.shutdown(nosave=True)
            except redis.RedisError:
                pass
            try:
                proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self._sigkill(proc)
        self._reap(proc)

    def kill9(self) -> None:
        """SIGKILL the server (a crash, as far as clients can tell) and reap it."""
        proc = self._proc
        if proc is None:
            return
        self._sigkill(proc)
        self._reap(proc)

    def close(self) -> None:
        """Stop the server and remove its temp dir. Safe to call repeatedly."""
        if self._closed:
            return
        try:
            self.stop()
        finally:
            self._closed = True
            shutil.rmtree(self.dir, ignore_errors=True)
            with _live_lock:
                _live_servers.discard(self)

    def is_alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def ping(self) -> bool:
        """True if the server answers PING right now."""
        if not self.port:
            return False
        try:
            with self.client(socket_timeout=1, socket_connect_timeout=0.5, retry=NO_RETRY) as conn:
                return bool(conn.ping())
        except redis.RedisError:
            return False

    def _answers_as(self, pid: int) -> bool:
        """True if *our* process (not some other server on the port) answers."""
        try:
            with self.client(
                socket_timeout=0.2, socket_connect_timeout=0.2, retry=NO_RETRY
            ) as conn:
                info = conn.info("server")
        except redis.RedisError:
            return False
        return bool(info.get("process_id") == pid)

    def read_log(self) -> str:
        try:
            return self.logfile.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "alive" if self.is_alive() else "stopped"
        return f"<RedisServer 127.0.0.1:{self.port} {state} dir={self.dir}>"

    # -- internals ----------------------------------------------------------

    def _require_port(self) -> None:
        if not self.port:
            raise RedisServerError("redis-server has not been started")

    def _build_argv(self, port: int) -> list[str]:
        return [
            self.executable,
            "--bind", "127.0.0.1",
            "--port", str(port),
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self.dir),
            "--daemonize", "no",
            "--logfile", str(self.logfile),
            "--enable-debug-command", "local",
            *self.extra_args,
        ]  # fmt: skip

    def _launch(self) -> None:
        """Start ``self._argv`` and wait until it answers PING."""
        log_offset = self.logfile.stat().st_size if self.logfile.exists() else 0
        stderr_path = self.dir / "redis.stderr"
        with open(stderr_path, "wb") as stderr:
            proc = subprocess.Popen(
                self._argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                cwd=self.dir,
                start_new_session=True,  # a Ctrl-C in the terminal must not kill it mid-test
                preexec_fn=set_pdeathsig,  # dies with us even on SIGKILL (Linux)
            )
        self._proc = proc
        deadline = time.monotonic() + self.startup_timeout
        while True:
            if proc.poll() is not None:
                self._reap(proc)
                raise RedisServerError(
                    f"redis-server exited with {proc.returncode} during startup "
                    f"(port {self.port}):\n{self._startup_output(stderr_path, log_offset)}"
                )
            if self._answers_as(proc.pid):
                return
            if time.monotonic() >= deadline:
                self._sigkill(proc)
                self._reap(proc)
                raise RedisServerError(
                    f"redis-server did not answer PING within {self.startup_timeout}s "
                    f"(port {self.port}):\n{self._startup_output(stderr_path, log_offset)}"
                )
            time.sleep(_POLL_INTERVAL)

    def _startup_output(self, stderr_path: Path, log_offset: int) -> str:
        stderr = stderr_path.read_text(errors="replace") if stderr_path.exists() else ""
        return (stderr + self.read_log()[log_offset:]).strip()[-4000:]

    @staticmethod
    def _sigkill(proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            try:
                os.kill(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    @staticmethod
    def _reap(proc: subprocess.Popen[bytes]) -> None:
        try:
            proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
            pass


@contextmanager
def password_protected(password: str) -> Iterator[RedisServer]:
    """A private redis-server that wants ``password`` (set after start: RedisServer
    probes without one); stopped on exit."""
    with RedisServer() as server:
        server.client().config_set("requirepass", password)
        try:
            yield server
        finally:  # so that RedisServer can SHUTDOWN it without the password
            server.client(password=password).config_set("requirepass", "")


@atexit.register
def _close_all() -> None:
    with _live_lock:
        servers = list(_live_servers)
    for server in servers:
        server.close()
