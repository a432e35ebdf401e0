"""Destination policy: non-public addresses are refused after resolution, at connect time,
unless ``RQUEUE["WEBHOOKS"]["ALLOWED_HOSTS"]`` allows them; real deliveries through an
in-process worker to a real server on 127.0.0.1."""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_django.fixtures import Settings as SettingsFixture

from django_rqueue import JobStatus, get_job
from django_rqueue.contrib.webhooks import DestinationRefused, Refusal, deliver
from django_rqueue.contrib.webhooks.conf import webhook_settings
from django_rqueue.contrib.webhooks.network import refusal
from django_rqueue.job import Job
from tests.support.http_server import ScriptedServer, http_server
from tests.support.inprocess import run_worker
from tests.support.tls import make_certificates

pytestmark = pytest.mark.usefixtures("worker_may_close_db_connections")


def allow(settings: SettingsFixture, *hosts: str) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "WEBHOOKS": {"ALLOWED_HOSTS": list(hosts)}}


def run(queued: Job[Any]) -> Job[Any]:
    run_worker(burst=True)
    job = get_job(queued.id)
    assert job is not None
    return job


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with http_server([(200, {})]) as server:
        yield server


def port(server: ScriptedServer) -> int:
    return int(server.url.rsplit(":", 1)[1])


@pytest.mark.parametrize(
    ("host", "address", "reason"),
    [
        ("127.0.0.1", "127.0.0.1", Refusal.LOOPBACK),
        ("localhost", None, Refusal.LOOPBACK),
        ("[::ffff:127.0.0.1]", "::ffff:127.0.0.1", Refusal.LOOPBACK),
        ("2130706433", "127.0.0.1", Refusal.LOOPBACK),  # decimal
        ("0x7f.1", "127.0.0.1", Refusal.LOOPBACK),  # hex, short form
        ("[::1]", "::1", Refusal.LOOPBACK),
        ("0.0.0.0", "0.0.0.0", Refusal.UNSPECIFIED),  # noqa: S104 - a refused destination
    ],
)
def test_a_loopback_destination_fails_at_once_without_a_request(
    host: str,
    address: str | None,
    reason: Refusal,
    server: ScriptedServer,
    settings: SettingsFixture,
) -> None:
    allow(settings)  # nothing allowed (the default)
    done = run(deliver.delay(f"http://{host}:{port(server)}/hook", {"order": 42}))

    assert done.status is JobStatus.FAILED and done.attempts == 1
    assert done.error is not None
    assert done.error["type"] == f"{DestinationRefused.__module__}.DestinationRefused"
    message = done.error["message"]
    assert f"destination {host.strip('[]')!r}" in message and str(reason) in message
    assert "ALLOWED_HOSTS" in message
    if address is not None and address != host.strip("[]"):
        assert f"({address})" in message
    assert server.requests == []


@pytest.mark.parametrize(
    ("allowed", "host"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("127.0.0.0/8", "[::ffff:127.0.0.1]"),  # an IPv4-mapped address is its IPv4 one
        ("127.0.0.0/8", "2130706433"),
        ("localhost", "localhost"),  # by name, whatever it resolves to
        ("LOCALHOST.", "localhost"),
        (".localhost", "localhost"),  # a domain and its subdomains
    ],
)
def test_allowed_hosts_let_a_loopback_destination_through(
    allowed: str, host: str, server: ScriptedServer, settings: SettingsFixture
) -> None:
    allow(settings, allowed)
    done = run(deliver.delay(f"http://{host}:{port(server)}/hook", {"order": 42}))
    assert done.status is JobStatus.SUCCEEDED
    assert len(server.requests) == 1


def test_an_entry_allows_only_what_it_names(
    server: ScriptedServer, settings: SettingsFixture
) -> None:
    allow(settings, "10.0.0.0/8", "hooks.internal", ".corp.example")
    done = run(deliver.delay(f"http://127.0.0.1:{port(server)}/", {}))
    assert done.status is JobStatus.FAILED and server.requests == []


def test_the_address_connected_to_is_the_one_vetted(
    server: ScriptedServer, settings: SettingsFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DNS rebinding: a name that resolves to an allowed address when vetted and to another
    one later must reach the vetted address (the name is resolved once, then the socket
    connects to the address). Here the resolver answers 127.0.0.1 first and 127.0.0.2 (where
    nothing listens) after: a second resolution would fail the delivery."""
    allow(settings, "127.0.0.1")
    real = socket.getaddrinfo
    asked: list[str] = []

    def rebinding(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host != "rebind.test":
            return real(host, *args, **kwargs)
        asked.append(host)
        return real("127.0.0.1" if len(asked) == 1 else "127.0.0.2", *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    done = run(deliver.delay(f"http://rebind.test:{port(server)}/hook", {}))

    assert done.status is JobStatus.SUCCEEDED, done.error
    assert asked == ["rebind.test"]
    assert server.requests[0].headers["Host"] == f"rebind.test:{port(server)}"


def test_https_keeps_the_host_name_for_sni_and_the_certificate_check(
    tmp_path: Path, settings: SettingsFixture
) -> None:
    """The socket connects to the vetted address, yet TLS sends the URL's host name (SNI) and
    checks the certificate: a real TLS server with one of an unknown CA sees ``localhost`` and
    the delivery refuses its certificate (a retrying error)."""
    make_certificates(tmp_path)  # a server certificate from a CA the client does not know
    cert, key = tmp_path / "server.crt", tmp_path / "server.key"
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    names: list[str | None] = []
    context.sni_callback = lambda sock, name, ctx: names.append(name)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(30)

    def serve() -> None:
        with listener, contextlib.suppress(OSError):
            connection, _ = listener.accept()
            with connection, contextlib.suppress(OSError):
                context.wrap_socket(connection, server_side=True)

    thread = threading.Thread(target=serve, name="test-tls", daemon=True)
    thread.start()
    allow(settings, "localhost")
    done = run(deliver.delay(f"https://localhost:{listener.getsockname()[1]}/hook", {}))
    thread.join(30)

    assert names == ["localhost"]
    assert done.status is JobStatus.SCHEDULED and done.error is not None
    assert "CERTIFICATE_VERIFY_FAILED" in done.error["message"]


def test_a_name_is_refused_if_any_of_its_addresses_is(
    server: ScriptedServer, settings: SettingsFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    allow(settings, "127.0.0.1")
    real = socket.getaddrinfo

    def two_addresses(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host != "mixed.test":
            return real(host, *args, **kwargs)
        return real("127.0.0.1", *args, **kwargs) + real("10.1.2.3", *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", two_addresses)
    done = run(deliver.delay(f"http://mixed.test:{port(server)}/hook", {}))
    assert done.status is JobStatus.FAILED and done.error is not None
    assert "'mixed.test' (10.1.2.3) refused: private address" in done.error["message"]
    assert server.requests == []


def test_without_the_setting_loopback_is_refused(
    server: ScriptedServer, settings: SettingsFixture
) -> None:
    settings.RQUEUE = {k: v for k, v in settings.RQUEUE.items() if k != "WEBHOOKS"}
    done = run(deliver.delay(f"{server.url}/hook", {}))
    assert done.status is JobStatus.FAILED and server.requests == []


def test_a_name_that_does_not_resolve_retries() -> None:
    done = run(deliver.delay("http://no-such-host.invalid/hook", {}))
    assert done.status is JobStatus.SCHEDULED and done.error is not None
    assert "'no-such-host.invalid'" in done.error["message"]  # cannot resolve it


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("10.0.0.1", Refusal.PRIVATE),
        ("172.16.5.4", Refusal.PRIVATE),
        ("192.168.1.1", Refusal.PRIVATE),
        ("169.254.169.254", Refusal.LINK_LOCAL),  # cloud metadata
        ("100.64.0.1", Refusal.SHARED),
        ("0.0.0.0", Refusal.UNSPECIFIED),  # noqa: S104
        ("127.8.9.10", Refusal.LOOPBACK),
        ("224.0.0.1", Refusal.MULTICAST),
        ("239.255.255.250", Refusal.MULTICAST),
        ("240.0.0.1", Refusal.RESERVED),
        ("255.255.255.255", Refusal.RESERVED),
        ("192.0.2.7", Refusal.PRIVATE),  # documentation (TEST-NET-1)
        ("198.18.0.1", Refusal.PRIVATE),  # benchmarking
        ("192.0.0.8", Refusal.PRIVATE),  # IETF protocol assignments
        ("::", Refusal.UNSPECIFIED),
        ("::1", Refusal.LOOPBACK),
        ("fe80::1", Refusal.LINK_LOCAL),
        ("fc00::1", Refusal.PRIVATE),
        ("fd12:3456::1", Refusal.PRIVATE),
        ("ff02::1", Refusal.MULTICAST),
        ("2001:db8::1", Refusal.PRIVATE),  # documentation
        ("::ffff:10.0.0.1", Refusal.PRIVATE),  # IPv4-mapped
        ("::ffff:169.254.169.254", Refusal.LINK_LOCAL),
        ("64:ff9b::a00:1", Refusal.PRIVATE),  # NAT64 of 10.0.0.1
        ("2002:7f00:1::", Refusal.LOOPBACK),  # 6to4 of 127.0.0.1
        ("8.8.8.8", None),
        ("1.1.1.1", None),
        ("2606:4700:4700::1111", None),
        ("::ffff:8.8.8.8", None),
        ("64:ff9b::808:808", None),  # NAT64 of 8.8.8.8
    ],
)
def test_which_addresses_are_refused(address: str, reason: Refusal | None) -> None:
    assert refusal(ipaddress.ip_address(address)) is reason


def test_the_setting_is_read_at_each_delivery(settings: SettingsFixture) -> None:
    allow(settings, "Hooks.Internal", ".Corp.Example.", "10.0.0.0/8", "[::1]")
    parsed = webhook_settings()
    assert parsed.allows_name("hooks.internal") and parsed.allows_name("HOOKS.internal.")
    assert parsed.allows_name("corp.example") and parsed.allows_name("a.b.corp.example")
    assert not parsed.allows_name("xcorp.example") and not parsed.allows_name("internal")
    assert parsed.allows_address(ipaddress.ip_address("10.9.8.7"))
    assert parsed.allows_address(ipaddress.ip_address("::ffff:10.9.8.7"))
    assert parsed.allows_address(ipaddress.ip_address("::1"))
    assert not parsed.allows_address(ipaddress.ip_address("11.0.0.1"))
    settings.RQUEUE = {**settings.RQUEUE, "WEBHOOKS": {}}
    assert webhook_settings().allowed_networks == ()
