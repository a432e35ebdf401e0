"""A real local HTTP server for tests: answers from a script of responses, records requests.

``with http_server([(503, {}), (200, {})]) as server:`` listens on 127.0.0.1 (a free
port), answers the n-th request with the n-th scripted ``(status, headers)`` (the
last one repeats), and keeps each request it got in ``server.requests``.
"""

from __future__ import annotations

import threading
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


@dataclass
class ScriptedServer:
    url: str
    script: Sequence[tuple[int, Mapping[str, str]]]
    requests: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, received: Received) -> tuple[int, Mapping[str, str]]:
        with self.lock:
            self.requests.append(received)
            return self.script[min(len(self.requests), len(self.script)) - 1]


@contextmanager
def http_server(script: Sequence[tuple[int, Mapping[str, str]]]) -> Iterator[ScriptedServer]:
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
            status, headers = holder[0].answer(received)
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", "0")
            self.end_headers()

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
