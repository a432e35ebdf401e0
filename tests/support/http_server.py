"""A real local HTTP server for tests: answers from a script of responses, records requests.

``with http_server([(503, {}), (200, {})]) as server:`` listens on 127.0.0.1 (a free
port), answers the n-th request with the n-th scripted ``(status, headers)`` (the
last one repeats), and keeps each request it got in ``server.requests``. A
:class:`Reply` in the script also sends a body: a big one, or one dripping slowly;
``server.sent`` counts the body bytes the client accepted before it closed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes
    #: Every header line as sent, in order (a name sent twice is here twice).
    raw_headers: Sequence[tuple[str, str]] = ()


@dataclass(frozen=True)
class Reply:
    """An answer with a body of ``size`` bytes (``b"x"``), sent ``chunk`` bytes at a time,
    ``interval`` seconds apart (a drip when ``interval`` > 0), with its Content-Length."""

    status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    size: int = 0
    chunk: int = 65_536
    interval: float = 0.0


Scripted = tuple[int, Mapping[str, str]] | Reply


@dataclass
class ScriptedServer:
    url: str
    script: Sequence[Scripted]
    requests: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: Body bytes written to clients (until one closed its connection).
    sent: int = 0

    def answer(self, received: Received) -> Reply:
        with self.lock:
            self.requests.append(received)
            scripted = self.script[min(len(self.requests), len(self.script)) - 1]
        return scripted if isinstance(scripted, Reply) else Reply(*scripted)

    def count(self, sent: int) -> None:
        with self.lock:
            self.sent += sent


@contextmanager
def http_server(script: Sequence[Scripted]) -> Iterator[ScriptedServer]:
    """Serve ``script`` (at least one response) until the block ends."""
    assert script, "the script needs at least one response"
    holder: list[ScriptedServer] = []

    class Handler(BaseHTTPRequestHandler):
        def handle_method(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            received = Received(
                self.command,
                self.path,
                dict(self.headers.items()),
                self.rfile.read(length),
                list(self.headers.items()),
            )
            reply = holder[0].answer(received)
            self.send_response(reply.status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(reply.size))
            self.end_headers()
            left = reply.size
            try:
                while left > 0:
                    piece = min(left, reply.chunk)
                    self.wfile.write(b"x" * piece)
                    self.wfile.flush()
                    holder[0].count(piece)
                    left -= piece
                    if left and reply.interval:
                        time.sleep(reply.interval)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        do_POST = do_PUT = do_PATCH = handle_method  # noqa: N815 - http.server's names

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    holder.append(ScriptedServer(f"http://127.0.0.1:{server.server_port}", script))
    thread = threading.Thread(target=server.serve_forever, name="test-http", daemon=True)
    thread.start()
    try:
        yield holder[0]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
