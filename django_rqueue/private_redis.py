"""A throw-away ``redis-server`` process for tests: :class:`PrivateRedis`.

It runs ``redis-server`` (found on ``PATH``) bound to 127.0.0.1 on a free port, in a temporary
directory, with persistence off (``--save ''``, ``--appendonly no``, the settings Redis's own
test suite starts servers with), and stops it by its pid. On Linux the child also gets
``PR_SET_PDEATHSIG``, so it dies with the process that started it even when that process is
killed with SIGKILL; :func:`atexit.register` stops it at a normal interpreter exit.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Self

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from .master.process import set_pdeathsig

__all__ = ["PrivateRedis", "RedisServerNotFound"]

#: Seconds to wait for the server to answer ``PING`` after it was started.
STARTUP_TIMEOUT = 5.0
#: Seconds to wait for the server to exit after ``SHUTDOWN NOSAVE`` before SIGKILL.
STOP_TIMEOUT = 5.0
#: Ports tried when another process takes the free port between choosing and binding it.
LAUNCH_ATTEMPTS = 5
#: A client that fails at once on a server that is not (or no longer) there.
_NO_RETRY = Retry(NoBackoff(), 0)


class RedisServerNotFound(FileNotFoundError):  # noqa: N818 - reads like the condition it names
    """No ``redis-server`` executable: not on ``PATH``, or the path given does not exist."""


class PrivateRedis:
    """One ``redis-server`` child process on ``127.0.0.1:<a free port>``, for tests.

    ``executable``: the ``redis-server`` to run (default: the one on ``PATH``);
    ``extra_args``: more command-line options, appended to the defaults (``--save ''
    --appendonly no``, the temporary ``--dir``, a ``--logfile`` in it).

    Use it as a context manager, or call :meth:`start` and :meth:`stop`::

        with PrivateRedis() as server:
            url = server.url  # "redis://127.0.0.1:<port>/0"

    Raises:
        RedisServerNotFound: (from the constructor) no ``redis-server`` executable.
    """

    def __init__(self, executable: str | None = None, extra_args: tuple[str, ...] = ()) -> None:
        found = shutil.which(executable or "redis-server")
        if found is None:
            raise RedisServerNotFound(
                f"{executable or 'redis-server'} not found"
                + ("" if executable else " on PATH (install Redis: apt-get install redis-server)")
            )
        self.executable = found
        self.extra_args = tuple(extra_args)
        #: The TCP port it listens on (0 until started).
        self.port = 0
        self._dir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs, else ``None``."""
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<port>/0``.

        Raises:
            RuntimeError: the server is not running.
        """
        if self.pid is None:
            raise RuntimeError("the private redis-server is not running: call start() first")
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        """A new ``redis.Redis`` client of the server's database 0 (the caller closes it).

        Raises:
            RuntimeError: the server is not running.
        """
        return redis.Redis.from_url(self.url, socket_timeout=10)

    def flush(self) -> None:
        """Delete every key of every database (``FLUSHALL``).

        Raises:
            RuntimeError: the server is not running.
        """
        with self.client() as client:
            client.flushall()

    def start(self) -> Self:
        """Start the server on a free port and wait until it answers ``PING``; a running
        server is left as it is.

        Raises:
            RuntimeError: ``redis-server`` exited during startup, or did not answer
                within ``STARTUP_TIMEOUT`` (5) seconds (the message quotes its log).
        """
        if self.pid is not None:
            return self
        self._dir = Path(tempfile.mkdtemp(prefix="rqueue-private-redis-"))
        errors: list[str] = []
        for _attempt in range(LAUNCH_ATTEMPTS):
            error = self._launch(_free_port())
            if error is None:
                atexit.register(self.stop)
                return self
            errors.append(error)
            if "Address already in use" not in error:
                break
        self.stop()
        raise RuntimeError("could not start redis-server:\n" + "\n".join(errors))

    def stop(self) -> None:
        """Stop the server (``SHUTDOWN NOSAVE``, then SIGKILL to its pid after
        ``STOP_TIMEOUT`` (5) seconds) and remove its directory; safe to call again."""
        process, self._process = self._process, None
        if process is not None:
            if process.poll() is None:
                try:
                    with redis.Redis(
                        port=self.port, socket_timeout=STOP_TIMEOUT, retry=_NO_RETRY
                    ) as client:
                        client.shutdown(nosave=True)
                except redis.RedisError:
                    pass
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                os.kill(process.pid, signal.SIGKILL)
                process.wait()
            atexit.unregister(self.stop)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def _launch(self, port: int) -> str | None:
        """Start the server on ``port``; ``None`` once it answers, else why it did not."""
        assert self._dir is not None  # noqa: S101 - start() made it
        log = self._dir / "redis.log"
        argv = [
            self.executable,
            "--bind", "127.0.0.1",
            "--port", str(port),
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self._dir),
            "--logfile", str(log),
            *self.extra_args,
        ]  # fmt: skip
        self.port = port
        self._process = process = subprocess.Popen(  # noqa: S603 - our own argv
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C in the terminal must not stop it mid-test
            preexec_fn=set_pdeathsig,
        )
        deadline = time.monotonic() + STARTUP_TIMEOUT
        with redis.Redis(
            port=port, socket_timeout=0.5, socket_connect_timeout=0.5, retry=_NO_RETRY
        ) as client:
            while process.poll() is None and time.monotonic() < deadline:
                try:
                    if client.info("server").get("process_id") == process.pid:
                        return None
                except redis.RedisError:
                    time.sleep(0.01)
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
        process.wait()
        self._process = None
        output = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        return f"redis-server on port {port} (exit status {process.returncode}):\n{output}"

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.pid is not None else "stopped"
        return f"<PrivateRedis 127.0.0.1:{self.port} {state}>"


def _free_port() -> int:
    """A TCP port of 127.0.0.1 that no process listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port
