"""An in-process TCP fault proxy between workers and Redis (no iptables, no root).

``FaultProxy(upstream_port)`` listens on ``127.0.0.1:<free port>`` and
forwards every connection to the real Redis. One thread pumps all
connections with ``select`` (a 50 ms tick, and a wake-up socket so that
commands take effect at once). Workers get :meth:`FaultProxy.url` as their
Redis URL; the test talks to the real port directly, so it can watch and
drive Redis while the workers' network misbehaves.

Modes, one per kind of network fault between a worker and Redis:

``pass``
    Forward both ways.
``drop_replies``
    Forward client → server, read and discard server → client: the server
    applies a write and the client never hears about it (it times out).
``hold_replies``
    Forward client → server, read and keep server → client: the server
    applies a request at once and the client gets the reply only when the
    mode changes again (a slow reply, or a client paused while waiting for
    it), unless its socket timeout comes first.
``blackhole``
    Accept and hold connections, forward nothing and read nothing: a
    half-open partition. Bytes wait in the kernel buffers and flow again
    when the mode goes back to ``pass``, like TCP after a partition heals.
``refuse``
    New connections are accepted and reset at once (Redis down or
    restarting). Switching to ``refuse`` also resets every open connection
    unless ``reset=False`` is passed.

``cut_after(marker)`` arms a partition of one connection at a chosen moment: the
next request (client bytes) containing ``marker`` is delivered to the server,
and from then on that connection is held both ways (nothing forwarded, nothing
reset) until :meth:`FaultProxy.heal`; the other connections go on as the mode
says. It stands for a partition that begins right after a request reached
Redis, so its reply is late by as long as the test wants.

``reset_all()`` resets every open connection (``SO_LINGER 0``, so the
client sees ``ECONNRESET``). :meth:`FaultProxy.set_mode` and
:meth:`FaultProxy.reset_all` run inside the pump thread and return only
once it applied them: no byte read after the call returns is handled under
the old mode.
"""

from __future__ import annotations

import select
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Self, cast

type Mode = Literal["pass", "drop_replies", "hold_replies", "blackhole", "refuse"]
MODES: tuple[Mode, ...] = ("pass", "drop_replies", "hold_replies", "blackhole", "refuse")

#: Seconds between the pump thread's passes when nothing happens.
TICK = 0.05
#: Bytes buffered towards one side before the proxy stops reading the other.
HIGH_WATER = 1 << 20
#: Seconds a command (mode change, reset) may wait for the pump thread.
COMMAND_TIMEOUT = 5.0


@dataclass
class ProxyStats:
    """Counters since the proxy started (read them from the test thread)."""

    accepted: int = 0
    refused: int = 0
    reset: int = 0
    bytes_up: int = 0
    bytes_down: int = 0
    dropped_down: int = 0


class _Pair:
    """One client connection and its upstream connection."""

    def __init__(self, client: socket.socket, server: socket.socket) -> None:
        self.client = client
        self.server = server
        self.to_server = bytearray()
        self.to_client = bytearray()
        #: Cut off by :meth:`FaultProxy.cut_after`: nothing moves either way until healed.
        self.cut = False

    def peer(self, sock: socket.socket) -> socket.socket:
        return self.server if sock is self.client else self.client

    def outbox(self, sock: socket.socket) -> bytearray:
        """The buffer of bytes waiting to be written to ``sock``."""
        return self.to_server if sock is self.server else self.to_client


def _hard_close(sock: socket.socket) -> None:
    """Close with an RST (``SO_LINGER`` on, 0 s) instead of a FIN."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


class FaultProxy:
    """A TCP proxy from ``127.0.0.1:<port>`` to ``upstream_host:upstream_port``."""

    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1") -> None:
        self.upstream = (upstream_host, upstream_port)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self._listener.setblocking(False)
        self.port: int = self._listener.getsockname()[1]
        self._mode: Mode = "pass"
        self._pairs: dict[socket.socket, _Pair] = {}
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._lock = threading.Lock()
        self._commands: list[tuple[Callable[[], object], threading.Event, list[object]]] = []
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        #: The bytes whose request cuts its connection off (:meth:`cut_after`), once.
        self._cut_marker: bytes | None = None
        self.stats = ProxyStats()

    # -- public API ---------------------------------------------------------

    def start(self) -> Self:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._pump, name=f"fault-proxy-{self.port}", daemon=True
            )
            self._thread.start()
        return self

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    @property
    def mode(self) -> Mode:
        return self._mode

    def set_mode(self, mode: Mode, *, reset: bool | None = None) -> None:
        """Switch to ``mode`` (``reset``: also reset open connections; default only for refuse)."""
        if mode not in MODES:
            raise ValueError(f"unknown proxy mode {mode!r} (one of {', '.join(MODES)})")
        do_reset = mode == "refuse" if reset is None else reset

        def apply() -> None:
            self._mode = mode
            if do_reset:
                self._reset_all()

        self._run(apply)

    def reset_all(self) -> int:
        """Reset every open connection (the client sees ECONNRESET); return how many."""
        return self._run(self._reset_all)

    def cut_after(self, marker: bytes) -> None:
        """Cut off the next connection whose request contains ``marker``, once that request
        reached the server (see the module docstring); :meth:`cut` tells when it happened."""
        if not marker:
            raise ValueError("cut_after needs a non-empty marker")

        def apply() -> None:
            self._cut_marker = marker

        self._run(apply)

    def cut(self) -> int:
        """Connections cut off right now (:meth:`cut_after`)."""
        return self._run(lambda: len({id(p) for p in self._pairs.values() if p.cut}))

    def heal(self) -> None:
        """Let the cut-off connections flow again (what they held goes through, in order)
        and disarm a :meth:`cut_after` that has not fired."""

        def apply() -> None:
            self._cut_marker = None
            for pair in self._pairs.values():
                pair.cut = False

        self._run(apply)

    def retarget(self, port: int, host: str = "127.0.0.1") -> None:
        """Send new connections to another upstream (open ones keep theirs)."""

        def apply() -> None:
            self.upstream = (host, port)

        self._run(apply)

    def connections(self) -> int:
        """Open client connections right now."""
        return self._run(lambda: len(self._pairs) // 2)

    def close(self) -> None:
        """Stop the pump thread and close every socket. Safe to call twice."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        self._wake()
        if self._thread is not None:
            self._thread.join(timeout=COMMAND_TIMEOUT)
            if self._thread.is_alive():  # pragma: no cover - the pump ticks every 50 ms
                raise RuntimeError("fault proxy thread did not stop")
        self._reset_all()
        self._listener.close()
        self._wake_r.close()
        self._wake_w.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        host, port = self.upstream
        return f"<FaultProxy 127.0.0.1:{self.port} -> {host}:{port} {self._mode}>"

    # -- commands run in the pump thread ------------------------------------

    def _run[T](self, command: Callable[[], T]) -> T:
        if self._thread is None or not self._thread.is_alive():
            return command()
        done = threading.Event()
        result: list[object] = []
        with self._lock:
            self._commands.append((command, done, result))
        self._wake()
        if not done.wait(COMMAND_TIMEOUT):
            raise RuntimeError("fault proxy did not apply a command in time")
        if isinstance(result[0], Exception):
            raise result[0]
        return cast(T, result[0])

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass

    def _run_commands(self) -> None:
        with self._lock:
            commands, self._commands = self._commands, []
        for command, done, result in commands:
            try:
                result.append(command())
            except Exception as exc:  # handed to the caller, never kills the pump
                result.append(exc)
            finally:
                done.set()

    def _reset_all(self) -> int:
        pairs = {id(p): p for p in self._pairs.values()}.values()
        for pair in pairs:
            _hard_close(pair.client)
            _hard_close(pair.server)
        self._pairs.clear()
        self.stats.reset += len(pairs)
        return len(pairs)

    # -- the pump -----------------------------------------------------------

    def _pump(self) -> None:
        while not self._stopping.is_set():
            self._run_commands()
            mode = self._mode
            readers: list[socket.socket] = [self._listener, self._wake_r]
            writers: list[socket.socket] = []
            if mode != "blackhole":
                for sock, pair in self._pairs.items():
                    if pair.cut:
                        continue
                    if pair.outbox(sock) and not (mode == "hold_replies" and sock is pair.client):
                        writers.append(sock)
                    # Back-pressure: stop reading a side whose peer is not draining.
                    if len(pair.outbox(pair.peer(sock))) < HIGH_WATER:
                        readers.append(sock)
            try:
                readable, writable, _ = select.select(readers, writers, [], TICK)
            except (OSError, ValueError):  # a socket closed under us by a command: retry
                continue
            for sock in readable:
                if sock is self._wake_r:
                    try:
                        self._wake_r.recv(4096)
                    except BlockingIOError:
                        pass
                elif sock is self._listener:
                    self._accept()
                elif sock in self._pairs:
                    self._read(sock, mode)
            for sock in writable:
                if sock in self._pairs:
                    self._write(sock)
        self._run_commands()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            if self._mode == "refuse":
                self.stats.refused += 1
                _hard_close(client)
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=1.0)
            except OSError:
                self.stats.refused += 1
                _hard_close(client)
                continue
            for sock in (client, server):
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pair = _Pair(client, server)
            self._pairs[client] = self._pairs[server] = pair
            self.stats.accepted += 1

    def _read(self, sock: socket.socket, mode: Mode) -> None:
        pair = self._pairs[sock]
        try:
            data = sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._close_pair(pair, flush_to=pair.peer(sock))
            return
        if sock is pair.client:
            pair.to_server += data
            self.stats.bytes_up += len(data)
            if self._cut_marker is not None and self._cut_marker in data:
                self._cut_marker = None
                self._deliver(pair.server, pair.to_server)
                pair.cut = True
        elif mode == "drop_replies":
            self.stats.dropped_down += len(data)
        else:
            pair.to_client += data
            self.stats.bytes_down += len(data)

    def _write(self, sock: socket.socket) -> None:
        pair = self._pairs[sock]
        outbox = pair.outbox(sock)
        try:
            sent = sock.send(outbox)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close_pair(pair)
            return
        del outbox[:sent]

    def _deliver(self, sock: socket.socket, outbox: bytearray) -> None:
        """Write all of ``outbox`` to ``sock`` now (a request that must reach the server
        before its connection is cut off); a socket that fails is left to the pump."""
        deadline = time.monotonic() + COMMAND_TIMEOUT
        while outbox and time.monotonic() < deadline:
            try:
                sent = sock.send(outbox)
            except (BlockingIOError, InterruptedError):
                select.select([], [sock], [], TICK)
                continue
            except OSError:
                return
            del outbox[:sent]

    def _close_pair(self, pair: _Pair, flush_to: socket.socket | None = None) -> None:
        """One side hung up: pass on what is buffered for the other side, then close both."""
        if flush_to is not None and pair.outbox(flush_to):
            try:
                flush_to.setblocking(True)
                flush_to.settimeout(0.5)
                flush_to.sendall(pair.outbox(flush_to))
            except OSError:
                pass
        for sock in (pair.client, pair.server):
            self._pairs.pop(sock, None)
            sock.close()


__all__ = ["MODES", "FaultProxy", "Mode", "ProxyStats"]
