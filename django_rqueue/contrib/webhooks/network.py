"""Where a delivery may connect, and for how long: an httpcore network backend.

Every connection a delivery opens goes through :class:`GuardedBackend`:

1. the URL's host is resolved once (``getaddrinfo``, in a helper thread so that it stays
   within the delivery's deadline);
2. every address it resolves to is vetted (:func:`refusal`): unless the host name or the
   address is allowed by ``RQUEUE["WEBHOOKS"]["ALLOWED_HOSTS"]`` (:mod:`.webhooks.conf`), a single
   loopback, private, link-local, shared (carrier-grade NAT), unspecified, multicast,
   reserved or otherwise non-global address refuses the destination
   (:class:`DestinationRefused`, a :class:`~django_rqueue.Reject`: the job fails at once);
3. the socket connects to a vetted address itself, never to the name, so DNS cannot answer
   differently between the check and the connection (DNS rebinding). TLS still gets the
   URL's host name for SNI and certificate checks, and the ``Host`` header is the URL's.

Every form of an IPv4 address that resolvers accept (``2130706433``, ``0x7f.1``...) resolves
to the address it stands for, so it is vetted as that address; an IPv6 address that embeds
an IPv4 one (IPv4-mapped ``::ffff:a.b.c.d``, NAT64 ``64:ff9b::/96``, 6to4 ``2002::/16``) is
judged by that IPv4 address, since that is where the packets end up. This is the approach
of SSRF filters such as ``advocate`` (for requests): vet at connect time, the address
actually connected to.

Redirects are never followed (a ``3xx`` fails the delivery), proxies from the environment
are not used (``trust_env=False``: a proxy would connect to the destination unvetted).

The backend's streams also enforce the delivery's total deadline (:func:`deadline`): every
name resolution, connect, TLS handshake, write and read gets at most the time left, so a
server that sends one byte a second cannot stretch a delivery past its ``timeout``.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from enum import StrEnum
from typing import Any

import httpcore
import httpx

from ...exceptions import Reject
from .conf import WebhookSettings

#: An IP address a host name resolves to.
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

#: NAT64's well-known prefix (RFC 6052 §2.1): the last 32 bits are an IPv4 address.
NAT64_PREFIX = ipaddress.IPv6Network("64:ff9b::/96")
#: Shared Address Space for carrier-grade NAT (RFC 6598).
SHARED_ADDRESS_SPACE = ipaddress.IPv4Network("100.64.0.0/10")


#: Blocks the IANA special-purpose registries mark "not globally reachable" (IPv4: RFC 6890
#: and its updates; IPv6: RFC 6890, 8190), with their globally reachable exceptions, as
#: Python 3.13's ``ipaddress`` reads them; checked here too because Python 3.12 before
#: 3.12.4 still called some of them global (``192.0.0.8``: python/cpython gh-113171).
NOT_GLOBALLY_REACHABLE: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = tuple(
    ipaddress.ip_network(block)
    for block in (
        "0.0.0.0/8", "10.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
        "192.0.0.0/24", "192.0.0.170/31", "192.0.2.0/24", "192.168.0.0/16", "198.18.0.0/15",
        "198.51.100.0/24", "203.0.113.0/24", "240.0.0.0/4", "255.255.255.255/32",
        "::1/128", "::/128", "::ffff:0:0/96", "64:ff9b:1::/48", "100::/64", "2001::/23",
        "2001:db8::/32", "2002::/16", "fc00::/7", "fe80::/10",
    )
)  # fmt: skip
GLOBALLY_REACHABLE_EXCEPTIONS: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = tuple(
    ipaddress.ip_network(block)
    for block in (
        "192.0.0.9/32", "192.0.0.10/32", "2001:1::1/128", "2001:1::2/128", "2001:3::/32",
        "2001:4:112::/48", "2001:20::/28", "2001:30::/28",
    )
)  # fmt: skip


def _not_globally_reachable(address: Address) -> bool:
    """``address`` lies in :data:`NOT_GLOBALLY_REACHABLE` and in none of its exceptions."""
    return any(address in block for block in NOT_GLOBALLY_REACHABLE) and not any(
        address in block for block in GLOBALLY_REACHABLE_EXCEPTIONS
    )


class Refusal(StrEnum):
    """Why an address is refused as a destination (checked in this order)."""

    UNSPECIFIED = "unspecified address"
    LOOPBACK = "loopback address"
    LINK_LOCAL = "link-local address"
    MULTICAST = "multicast address"
    SHARED = "shared address space (carrier-grade NAT)"
    PRIVATE = "private address"
    RESERVED = "reserved address"
    NOT_GLOBAL = "not a globally routable address"


class DestinationRefused(Reject):
    """A delivery's destination is not allowed; the job fails at once, without retries.

    The message names the host, the address and the :class:`Refusal`.
    """

    def __init__(self, host: str, address: Address, reason: Refusal) -> None:
        self.host = host
        self.address = address
        self.refusal = reason
        shown = f"{host!r}" if host == str(address) else f"{host!r} ({address})"
        super().__init__(
            f"destination {shown} refused: {reason}; allow it in "
            "RQUEUE['WEBHOOKS']['ALLOWED_HOSTS'] if it is meant to be reached"
        )


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in NAT64_PREFIX:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address.sixtofour


def refusal(address: Address) -> Refusal | None:
    """Why ``address`` may not be a destination without an allow-list entry, or ``None`` for
    a public (globally routable, unicast) address.

    An IPv6 address embedding an IPv4 one is judged by the IPv4 address (module docstring).
    The categories are :mod:`ipaddress`'s, after the IANA special-purpose registries.
    """
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            return refusal(embedded)
    if address.is_unspecified:
        return Refusal.UNSPECIFIED
    if address.is_loopback:
        return Refusal.LOOPBACK
    if address.is_link_local:
        return Refusal.LINK_LOCAL
    if address.is_multicast:
        return Refusal.MULTICAST
    if isinstance(address, ipaddress.IPv4Address) and address in SHARED_ADDRESS_SPACE:
        return Refusal.SHARED
    if address.is_reserved:
        return Refusal.RESERVED
    if address.is_private or _not_globally_reachable(address):
        return Refusal.PRIVATE
    if not address.is_global:
        return Refusal.NOT_GLOBAL
    return None


# --- the deadline -----------------------------------------------------------------------------

#: ``time.monotonic()`` by which the current delivery must be done (``None``: no deadline).
_deadline: ContextVar[float | None] = ContextVar("rqueue_webhook_deadline", default=None)


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Within the block, the connections of :class:`GuardedBackend` finish every step by
    ``seconds`` from now (wall-clock, monotonic) or raise httpcore's timeout of that step."""
    token = _deadline.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _deadline.reset(token)


def _time_left(timeout: float | None, error: type[httpcore.TimeoutException]) -> float | None:
    """``timeout`` cut to the time left before the deadline; ``error`` once it has passed."""
    end = _deadline.get()
    if end is None:
        return timeout
    left = end - time.monotonic()
    if left <= 0:
        raise error("the delivery's total timeout has passed")
    return left if timeout is None else min(timeout, left)


class DeadlineStream(httpcore.NetworkStream):
    """A stream whose every read, write and TLS handshake ends by the deadline."""

    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _time_left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _time_left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        left = _time_left(timeout, httpcore.ConnectTimeout)
        return DeadlineStream(self._stream.start_tls(ssl_context, server_hostname, left))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


# --- resolving and connecting -----------------------------------------------------------------


def resolve(host: str, port: int, timeout: float | None) -> list[Address]:
    """The addresses ``host`` resolves to for TCP, in the resolver's order, without duplicates.

    ``getaddrinfo`` cannot be interrupted, so it runs in a daemon thread that is left behind
    if it outlasts ``timeout`` (it cannot hold up the process's exit).

    Raises:
        httpcore.ConnectError: the name does not resolve.
        httpcore.ConnectTimeout: not resolved within ``timeout`` seconds.
    """
    outcome: list[list[tuple[Any, ...]] | OSError] = []
    done = threading.Event()

    def run() -> None:
        try:
            outcome.append(
                socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
            )
        except OSError as exc:
            outcome.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, name="rqueue-webhook-dns", daemon=True).start()
    if not done.wait(timeout):
        raise httpcore.ConnectTimeout(f"resolving {host!r} took too long")
    infos = outcome[0]
    if isinstance(infos, OSError):
        raise httpcore.ConnectError(f"cannot resolve {host!r}: {infos}") from infos
    addresses: list[Address] = []
    for _, _, _, _, sockaddr in infos:
        if not isinstance(sockaddr[0], str):  # not an IP socket address
            continue
        address = ipaddress.ip_address(sockaddr[0].split("%", 1)[0])  # without an IPv6 scope
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise httpcore.ConnectError(f"{host!r} has no IP address")
    return addresses


class GuardedBackend(httpcore.NetworkBackend):
    """httpcore's sync backend, connecting only to vetted addresses (module docstring)."""

    def __init__(self, settings: WebhookSettings) -> None:
        self._settings = settings
        self._backend = httpcore.SyncBackend()

    def vet(self, host: str, addresses: Iterable[Address]) -> None:
        """Raise :class:`DestinationRefused` for the first address of ``host`` refused."""
        if self._settings.allows_name(host):
            return
        for address in addresses:
            reason = refusal(address)
            if reason is not None and not self._settings.allows_address(address):
                raise DestinationRefused(host, address, reason)

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        addresses = resolve(host, port, _time_left(timeout, httpcore.ConnectTimeout))
        self.vet(host, addresses)
        failure: httpcore.ConnectError | None = None
        for address in addresses:  # as socket.create_connection: the first that answers
            try:
                stream = self._backend.connect_tcp(
                    str(address),
                    port,
                    _time_left(timeout, httpcore.ConnectTimeout),
                    local_address,
                    socket_options,
                )
            except httpcore.ConnectError as exc:
                failure = exc
                continue
            return DeadlineStream(stream)
        assert failure is not None  # noqa: S101 - resolve() returns at least one address
        raise failure

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("webhook deliveries do not use Unix sockets")

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


def guarded_client(settings: WebhookSettings) -> httpx.Client:
    """An httpx client whose connections go through :class:`GuardedBackend`: no redirects
    followed, no proxy or certificate settings taken from the environment."""
    transport = httpx.HTTPTransport(trust_env=False)
    # httpx builds its httpcore pool without a way to give it a network backend: this is the
    # same pool as httpx's own default, with the guarded backend.
    transport._pool = httpcore.ConnectionPool(
        ssl_context=httpx.create_ssl_context(trust_env=False),
        max_connections=100,  # httpx's default limits
        max_keepalive_connections=20,
        keepalive_expiry=5.0,
        network_backend=GuardedBackend(settings),
    )
    return httpx.Client(transport=transport, follow_redirects=False, trust_env=False)
