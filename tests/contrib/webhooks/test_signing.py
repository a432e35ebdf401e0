"""``X-Rqueue-Signature``: Stripe's ``t=<unix seconds>,v1=<hex HMAC-SHA256 of "t.body">``,
checked against Python's hmac directly, and :func:`verify_signature`'s refusals."""

from __future__ import annotations

import hashlib
import hmac
import time

import pytest

from django_rqueue.contrib.webhooks import (
    SIGNATURE_HEADER,
    InvalidSignature,
    SignatureProblem,
    sign,
    verify_signature,
)

BODY = b'{"id":"hooks:1","attempt":1,"data":{"order":42}}'


def hex_hmac(secret: str, signed: bytes) -> str:
    return hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def test_the_header_is_stripe_s_scheme_over_timestamp_dot_body() -> None:
    expected = hex_hmac("s3cret", b"1700000000." + BODY)
    assert sign(BODY, "s3cret", timestamp=1_700_000_000) == f"t=1700000000,v1={expected}"
    assert SIGNATURE_HEADER == "X-Rqueue-Signature"


def test_several_secrets_give_one_v1_each_in_order() -> None:
    header = sign(BODY, ["new", "old"], timestamp=5)
    assert header == f"t=5,v1={hex_hmac('new', b'5.' + BODY)},v1={hex_hmac('old', b'5.' + BODY)}"


def test_a_fresh_signature_verifies_and_returns_its_timestamp() -> None:
    now = int(time.time())
    assert verify_signature("s3cret", BODY, sign(BODY, "s3cret", timestamp=now)) == now
    # a receiver rotating its secret accepts either; a sender rotating sends both
    assert verify_signature(["other", "s3cret"], BODY, sign(BODY, "s3cret")) > 0
    assert verify_signature("s3cret", BODY, sign(BODY, ["s3cret", "old"])) > 0
    # unknown schemes beside v1 are ignored (room for a later one)
    assert verify_signature("s3cret", BODY, "v9=zz, " + sign(BODY, "s3cret")) > 0


def problem(secret: str, body: bytes, header: str | None, tolerance: float = 300) -> str:
    with pytest.raises(InvalidSignature) as caught:
        verify_signature(secret, body, header, tolerance)
    assert isinstance(caught.value, ValueError)
    assert str(caught.value).startswith(str(caught.value.problem))
    return caught.value.problem


@pytest.mark.parametrize("header", [None, "", "  "])
def test_a_missing_header(header: str | None) -> None:
    assert problem("s3cret", BODY, header) is SignatureProblem.MISSING


@pytest.mark.parametrize(
    "header",
    [
        "sha256=" + "0" * 64,  # the former GitHub-style header
        "v1=" + "0" * 64,  # no timestamp
        "t=123",  # no signature
        "t=12x,v1=" + "0" * 64,
        "t=1,t=2,v1=" + "0" * 64,
        "garbage",
    ],
)
def test_a_malformed_header(header: str) -> None:
    assert problem("s3cret", BODY, header) is SignatureProblem.MALFORMED


def test_a_replayed_or_future_timestamp_is_outside_the_tolerance() -> None:
    now = int(time.time())
    old = sign(BODY, "s3cret", timestamp=now - 301)
    assert problem("s3cret", BODY, old) is SignatureProblem.OUTSIDE_TOLERANCE
    assert verify_signature("s3cret", BODY, old, tolerance=400) == now - 301
    future = sign(BODY, "s3cret", timestamp=now + 3600)
    assert problem("s3cret", BODY, future) is SignatureProblem.OUTSIDE_TOLERANCE


def test_a_changed_body_secret_timestamp_or_signature_matches_nothing() -> None:
    now = int(time.time())
    good = sign(BODY, "s3cret", timestamp=now)
    assert problem("s3cret", BODY + b" ", good) is SignatureProblem.NO_MATCH
    assert problem("other", BODY, good) is SignatureProblem.NO_MATCH
    moved = good.replace(f"t={now}", f"t={now - 1}")
    assert problem("s3cret", BODY, moved) is SignatureProblem.NO_MATCH
    upper = f"t={now},v1={good.split('v1=')[1].upper()}"
    assert problem("s3cret", BODY, upper) is SignatureProblem.NO_MATCH


@pytest.mark.parametrize(
    ("body", "secret", "error"),
    [
        ("text", "k", TypeError),
        (b"x", b"k", TypeError),
        (b"x", "", ValueError),
        (b"x", [], ValueError),
        (b"x", ["k", ""], ValueError),
        (b"x", ["k", 1], TypeError),
    ],
)
def test_bad_arguments_are_errors(body: object, secret: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        sign(body, secret)  # type: ignore[arg-type]
    with pytest.raises(error):
        verify_signature(secret, body, "t=1,v1=00")  # type: ignore[arg-type]


def test_a_negative_tolerance_is_an_error() -> None:
    with pytest.raises(ValueError, match="tolerance"):
        verify_signature("k", b"x", sign(b"x", "k"), tolerance=-1)
