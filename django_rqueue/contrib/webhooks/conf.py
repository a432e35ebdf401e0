"""``RQUEUE["WEBHOOKS"]``: the settings of webhook deliveries, read at each delivery.

::

    RQUEUE = {
        ...,
        "WEBHOOKS": {
            # destinations allowed although not public (default: none)
            "ALLOWED_HOSTS": ["hooks.internal", ".corp.example", "10.20.0.0/16", "::1"],
            "MAX_RESPONSE_BYTES": 65536,  # of a reply's body kept (default 64 KiB)
        },
    }

``ALLOWED_HOSTS`` entries are host names or IP networks. A host name matches the URL's
host exactly (case-insensitive); one starting with a dot also matches every subdomain
(``".corp.example"``: ``corp.example``, ``a.corp.example``...), as Django's own
``ALLOWED_HOSTS``. A network in CIDR notation (``"10.20.0.0/16"``) or a single address
(``"127.0.0.1"``, ``"::1"``) matches the addresses the host resolves to. Public addresses
never need an entry; see :mod:`.network` for what is refused without one.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.core import checks
from django.core.checks import CheckMessage
from django.core.exceptions import ImproperlyConfigured

from ...conf import defaults, raw_setting, unknown_keys

#: Bytes of a reply's body a delivery keeps (64 KiB): enough for an error message or a small
#: JSON answer for ``retry_if``; the rest is never read.
DEFAULT_MAX_RESPONSE_BYTES = defaults.WEBHOOK_MAX_RESPONSE_BYTES
KEYS = frozenset({"ALLOWED_HOSTS", "MAX_RESPONSE_BYTES"})
#: A host name entry: DNS labels (letters, digits, hyphens, underscores) separated by dots,
#: optionally with a leading dot (subdomains too).
HOST_NAME_RE = re.compile(
    r"^\.?(?=.{1,253}$)[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
    r"(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*\.?$"
)

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class WebhookSettings:
    """The parsed ``RQUEUE["WEBHOOKS"]`` (module docstring)."""

    #: Host names allowed whatever they resolve to (lower case, without a trailing dot).
    allowed_names: frozenset[str] = frozenset()
    #: Domains whose subdomains are allowed too (lower case, without the leading dot).
    allowed_domains: frozenset[str] = frozenset()
    #: Networks whose addresses are allowed.
    allowed_networks: tuple[Network, ...] = ()
    #: Bytes of a reply's body kept (the rest is not read).
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES

    def allows_name(self, host: str) -> bool:
        """Whether the URL host ``host`` is allowed by name."""
        host = host.lower().rstrip(".")
        return host in self.allowed_names or any(
            host == domain or host.endswith("." + domain) for domain in self.allowed_domains
        )

    def allows_address(self, address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
        """Whether ``address`` (or the IPv4 address an IPv4-mapped IPv6 one stands for) is in
        an allowed network."""
        candidates: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = [address]
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            candidates.append(address.ipv4_mapped)
        return any(
            each.version == network.version and each in network
            for each in candidates
            for network in self.allowed_networks
        )


def _network(entry: str) -> Network | None:
    """The network an entry names, or ``None`` if it is not an address or a network;
    ``ValueError`` for a network with host bits set (``10.0.0.1/8``)."""
    text = entry[1:-1] if entry.startswith("[") and entry.endswith("]") else entry
    try:
        ipaddress.ip_address(text.split("/", 1)[0])
    except ValueError:
        return None
    return ipaddress.ip_network(text, strict=True)


def problems(raw: object) -> list[CheckMessage]:
    """Every problem of ``RQUEUE["WEBHOOKS"]`` (``raw`` is the whole ``RQUEUE``).

    Ids: E100 ``WEBHOOKS`` is not a dict or has an unknown key; E101 ``ALLOWED_HOSTS`` is not
    a list of host names and networks (naming the bad entry); E102 ``MAX_RESPONSE_BYTES`` is
    not an integer >= 0; W100 an ``ALLOWED_HOSTS`` network holds every address of its
    family (``0.0.0.0/0``, ``::/0``), which turns the destination policy off for it.
    """
    if not isinstance(raw, Mapping) or "WEBHOOKS" not in raw:
        return []
    options = raw["WEBHOOKS"]
    if not isinstance(options, Mapping):
        return [
            checks.Error(
                f"RQUEUE['WEBHOOKS'] must be a dict, got {options!r}.",
                hint=f"Keys: {', '.join(sorted(KEYS))}.",
                id="rqueue.E100",
            )
        ]
    found = unknown_keys("RQUEUE['WEBHOOKS']", options, KEYS, "rqueue.E100")
    hosts = options.get("ALLOWED_HOSTS", [])
    hint = (
        "Host names ('hooks.internal', '.corp.example' for a domain and its subdomains) "
        "and IP networks ('10.20.0.0/16', '127.0.0.1', '::1')."
    )
    if not isinstance(hosts, list | tuple):
        found.append(
            checks.Error(
                f"RQUEUE['WEBHOOKS']['ALLOWED_HOSTS'] must be a list, got {hosts!r}.",
                hint=hint,
                id="rqueue.E101",
            )
        )
    else:
        for entry in hosts:
            problem = _entry_problem(entry)
            network = None if problem or not isinstance(entry, str) else _network(entry)
            if problem:
                found.append(
                    checks.Error(
                        f"RQUEUE['WEBHOOKS']['ALLOWED_HOSTS'] entry {entry!r}: {problem}.",
                        hint=hint,
                        id="rqueue.E101",
                    )
                )
            elif network is not None and network.prefixlen == 0:
                found.append(
                    checks.Warning(
                        f"RQUEUE['WEBHOOKS']['ALLOWED_HOSTS'] entry {entry!r} allows every "
                        f"IPv{network.version} address: deliveries may reach loopback, "
                        "private and cloud metadata addresses.",
                        hint="List only the networks or host names of your internal receivers.",
                        id="rqueue.W100",
                    )
                )
    size = options.get("MAX_RESPONSE_BYTES", DEFAULT_MAX_RESPONSE_BYTES)
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        found.append(
            checks.Error(
                f"RQUEUE['WEBHOOKS']['MAX_RESPONSE_BYTES'] must be an integer >= 0, got {size!r}.",
                hint=f"Bytes of a reply's body a delivery reads (default "
                f"{DEFAULT_MAX_RESPONSE_BYTES}).",
                id="rqueue.E102",
            )
        )
    return found


def _entry_problem(entry: object) -> str:
    """Why ``entry`` is not a valid ``ALLOWED_HOSTS`` entry ('' if it is)."""
    if not isinstance(entry, str):
        return "not a str"
    try:
        if _network(entry) is not None:
            return ""
    except ValueError as exc:
        return f"not a network ({exc})"
    if not HOST_NAME_RE.match(entry):
        return "neither a host name nor an IP address or network"
    return ""


def webhook_settings() -> WebhookSettings:
    """Return ``RQUEUE["WEBHOOKS"]``, parsed now (settings are read at each delivery).

    Raises:
        django.core.exceptions.ImproperlyConfigured: the setting has an error (its check id
            first; ``manage.py check`` lists them all).
    """
    raw = raw_setting()
    errors = [p for p in problems(raw) if p.is_serious()]
    if errors:
        raise ImproperlyConfigured(f"{errors[0].id}: {errors[0].msg}")
    options: Mapping[str, Any] = raw.get("WEBHOOKS", {}) if isinstance(raw, Mapping) else {}
    names: set[str] = set()
    domains: set[str] = set()
    networks: list[Network] = []
    for entry in options.get("ALLOWED_HOSTS", []):
        network = _network(entry)
        if network is not None:
            networks.append(network)
        elif entry.startswith("."):
            domains.add(entry[1:].lower().rstrip("."))
        else:
            names.add(entry.lower().rstrip("."))
    return WebhookSettings(
        allowed_names=frozenset(names),
        allowed_domains=frozenset(domains),
        allowed_networks=tuple(networks),
        max_response_bytes=options.get("MAX_RESPONSE_BYTES", DEFAULT_MAX_RESPONSE_BYTES),
    )
