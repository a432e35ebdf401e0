"""The ``X-Rqueue-Signature`` header, Stripe's webhook signature scheme (Stripe docs, "Check the
webhook signatures": ``Stripe-Signature: t=<timestamp>,v1=<signature>``)::

    X-Rqueue-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">

``<body>`` is the exact bytes sent, and the key is the shared secret (UTF-8). Signing the
timestamp with the body lets a receiver refuse a captured delivery replayed later
(:func:`verify_signature`'s ``tolerance``). While a secret is being rotated, the sender signs
with each of its secrets and the header carries one ``v1=`` per secret; a receiver accepts the
request if any of them matches one of the secrets it knows. Keys other than ``t`` and ``v1``
are ignored, so a later scheme can be added beside ``v1``.

A signed delivery's body is the envelope ``{"id": <delivery id>, "attempt": <from 1>,
"data": <payload>}`` (:mod:`.jobs`), so the delivery id and the attempt number are covered by
the signature as well.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from collections.abc import Sequence
from enum import StrEnum

#: The request header that carries the signature.
SIGNATURE_HEADER = "X-Rqueue-Signature"
#: Seconds: how far a signature's timestamp may be from the receiver's clock (Stripe's default).
DEFAULT_TOLERANCE = 300
#: The signature scheme this module signs with and checks.
SCHEME = "v1"

_HEX_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class SignatureProblem(StrEnum):
    """What :func:`verify_signature` found wrong (:attr:`InvalidSignature.problem`)."""

    MISSING = "missing header"
    MALFORMED = "malformed header"
    OUTSIDE_TOLERANCE = "timestamp outside the tolerance"
    NO_MATCH = "no matching signature"


class InvalidSignature(ValueError):  # noqa: N818 - named as the receiver reads it
    """A request's signature does not check out; :attr:`problem` says why and the message
    gives the details. A subclass of ``ValueError``."""

    def __init__(self, problem: SignatureProblem, detail: str) -> None:
        #: What is wrong, a :class:`SignatureProblem`.
        self.problem = problem
        super().__init__(f"{problem}: {detail}")


def _secrets(secret: object) -> list[bytes]:
    """The secrets as bytes, checked: a non-empty str or a non-empty sequence of them."""
    secrets: object = [secret] if isinstance(secret, str) else secret
    if isinstance(secrets, bytes | bytearray) or not isinstance(secrets, Sequence):
        raise TypeError(f"secret must be a str or a list of str, got {type(secret).__name__}")
    if not secrets:
        raise ValueError("secret must not be an empty list")
    for each in secrets:
        if not isinstance(each, str):
            raise TypeError(f"secret must be a str or a list of str, got {type(each).__name__}")
        if not each:
            raise ValueError("secret must not be empty")
    return [each.encode() for each in secrets]


def _digest(secret: bytes, timestamp: int, body: bytes) -> str:
    return hmac.new(secret, b"%d." % timestamp + body, hashlib.sha256).hexdigest()


def sign(body: bytes, secret: str | Sequence[str], timestamp: int | None = None) -> str:
    """Return the ``X-Rqueue-Signature`` value for ``body`` (the exact bytes sent):
    ``"t=<timestamp>,v1=<64 hex digits>"``, with one ``v1=`` per secret, in order.

    ``timestamp`` is in Unix seconds (default: now).

    Raises:
        TypeError: ``body`` is not bytes, ``secret`` not a str or a list of str.
        ValueError: a secret is empty, or the list is.
    """
    if not isinstance(body, bytes):
        raise TypeError(f"body must be bytes, got {type(body).__name__}")
    keys = _secrets(secret)
    t = int(time.time()) if timestamp is None else timestamp
    return ",".join([f"t={t}", *(f"{SCHEME}={_digest(key, t, body)}" for key in keys)])


def _parse(header: str) -> tuple[int, list[str]]:
    """``(timestamp, [v1 signatures])`` of a header value (:class:`InvalidSignature` if
    malformed)."""
    timestamps: list[str] = []
    signatures: list[str] = []
    for item in header.split(","):
        key, sep, value = item.strip().partition("=")
        if not sep:
            raise InvalidSignature(SignatureProblem.MALFORMED, f"{item.strip()!r} is not key=value")
        if key == "t":
            timestamps.append(value)
        elif key == SCHEME:
            signatures.append(value)
    if len(timestamps) != 1 or not timestamps[0].isascii() or not timestamps[0].isdigit():
        raise InvalidSignature(SignatureProblem.MALFORMED, "expected exactly one t=<unix seconds>")
    if not signatures:
        raise InvalidSignature(SignatureProblem.MALFORMED, f"no {SCHEME}= signature")
    return int(timestamps[0]), signatures


def verify_signature(
    secret: str | Sequence[str],
    body: bytes,
    header: str | None,
    tolerance: float = DEFAULT_TOLERANCE,
) -> int:
    """Check a received request's signature; return its timestamp (Unix seconds).

    ``secret`` is the shared secret, or a list of them while one is rotated (any may match);
    ``body`` the raw request body (``request.body`` in Django: the exact bytes, before any
    JSON parsing); ``header`` the received ``X-Rqueue-Signature`` value (``None`` when
    absent); ``tolerance`` how many seconds the signed timestamp may differ from this host's
    clock, either way. Signatures are compared in constant time (``hmac.compare_digest``).

    Raises:
        InvalidSignature: with :attr:`~InvalidSignature.problem`
            ``MISSING`` (no header), ``MALFORMED`` (not ``t=<digits>,v1=<hex>[,v1=...]``),
            ``OUTSIDE_TOLERANCE`` (the timestamp is more than ``tolerance`` seconds away from
            now: a replay, or a clock off) or ``NO_MATCH`` (no ``v1`` is the HMAC of this body
            under any of the secrets: a wrong secret or a changed body).
        TypeError, ValueError: bad ``secret`` or ``body`` (as :func:`sign`), or a negative
            ``tolerance``.
    """
    if not isinstance(body, bytes):
        raise TypeError(f"body must be bytes, got {type(body).__name__}")
    keys = _secrets(secret)
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float) or tolerance < 0:
        raise ValueError(f"tolerance must be a number of seconds >= 0, got {tolerance!r}")
    if header is None or not header.strip():
        raise InvalidSignature(SignatureProblem.MISSING, f"no {SIGNATURE_HEADER} header")
    timestamp, signatures = _parse(header)
    skew = time.time() - timestamp
    if abs(skew) > tolerance:
        raise InvalidSignature(
            SignatureProblem.OUTSIDE_TOLERANCE,
            f"signed at {timestamp}, {skew:+.0f} s from now (tolerance {tolerance} s)",
        )
    expected = [_digest(key, timestamp, body) for key in keys]
    matched = False
    for candidate in signatures:
        if not _HEX_SHA256.match(candidate):
            continue
        for digest in expected:
            matched |= hmac.compare_digest(digest, candidate)
    if not matched:
        raise InvalidSignature(
            SignatureProblem.NO_MATCH,
            f"none of the {len(signatures)} {SCHEME} signature(s) matches the body "
            f"under the {len(keys)} secret(s) given",
        )
    return timestamp
