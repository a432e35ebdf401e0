"""The ``X-Rqueue-Signature`` header: HMAC-SHA256 of the request body, as GitHub signs its
webhooks (``X-Hub-Signature-256: sha256=<hex>``, GitHub docs "Validating webhook
deliveries"). A receiver recomputes it over the raw body with the shared secret and
compares in constant time (:func:`verify`)."""

from __future__ import annotations

import hashlib
import hmac

#: The request header that carries the signature.
SIGNATURE_HEADER = "X-Rqueue-Signature"


def signature(body: bytes, secret: str) -> str:
    """Return the header value for ``body`` (the exact bytes sent): ``"sha256=<64 hex digits>"``.

    Raises:
        TypeError: ``body`` is not bytes or ``secret`` not a str.
        ValueError: ``secret`` is empty.
    """
    if not isinstance(body, bytes):
        raise TypeError(f"body must be bytes, got {type(body).__name__}")
    if not isinstance(secret, str):
        raise TypeError(f"secret must be a str, got {type(secret).__name__}")
    if not secret:
        raise ValueError("secret must not be empty")
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def verify(body: bytes, secret: str, header: str | None) -> bool:
    """Whether ``header`` (the received ``X-Rqueue-Signature`` value, or ``None`` when
    absent) is the signature of ``body`` under ``secret``; compared in constant time.

    Raises what :func:`signature` raises for a bad ``body`` or ``secret``.
    """
    expected = signature(body, secret)
    return header is not None and hmac.compare_digest(expected, header)
