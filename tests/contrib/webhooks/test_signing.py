"""``X-Rqueue-Signature``: HMAC-SHA256 of the body, checked against Python's hmac directly."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from django_rqueue.contrib.webhooks import SIGNATURE_HEADER, signature, verify


def test_the_signature_is_sha256_hmac_of_the_body_in_github_s_format() -> None:
    body = b'{"order":42}'
    expected = hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    assert signature(body, "s3cret") == f"sha256={expected}"
    assert SIGNATURE_HEADER == "X-Rqueue-Signature"


def test_verify_accepts_the_signature_and_refuses_anything_else() -> None:
    body = b'{"order":42}'
    good = signature(body, "s3cret")
    assert verify(body, "s3cret", good)
    assert not verify(body + b" ", "s3cret", good)
    assert not verify(body, "other", good)
    assert not verify(body, "s3cret", None)
    assert not verify(body, "s3cret", good.upper())


@pytest.mark.parametrize(
    ("body", "secret", "error"),
    [("text", "k", TypeError), (b"x", b"k", TypeError), (b"x", "", ValueError)],
)
def test_bad_arguments_are_errors(body: object, secret: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        signature(body, secret)  # type: ignore[arg-type]
