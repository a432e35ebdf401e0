"""The demo's jobs. Workers import this module at start (``jobs.py`` autodiscovery)."""

from typing import Any

import httpx
from django.core import signing
from django.core.mail import send_mail
from django.urls import reverse

from django_rqueue import Job, job

from .store import REPORT_ORDER, demo_key, redis_client

#: Salt of the signed token in password-reset links.
RESET_SALT = "example_project.demo.password-reset"
#: Seconds a reset link stays valid.
RESET_MAX_AGE = 3600


def quick_retry(attempt: int, exception: BaseException) -> float:
    """Backoff for the demo: retry after 0.2 s instead of the exponential default."""
    return 0.2


@job(queue="emails", max_attempts=5)
def send_reset_email(email: str, site_url: str = "http://127.0.0.1:8000") -> str:
    """Email a password-reset link to ``email``; return the link.

    The view answers at once and a worker sends the mail later: a slow SMTP
    server never holds up the request.
    """
    token = signing.dumps(email, salt=RESET_SALT)
    link = site_url.rstrip("/") + reverse("password_reset_confirm", args=[token])
    send_mail(
        subject="Reset your password",
        message=(
            f"Someone (hopefully you) asked to reset the password of {email}.\n\n"
            f"Open this link within an hour to choose a new one:\n{link}\n\n"
            "If it was not you, ignore this email.\n"
        ),
        from_email=None,
        recipient_list=[email],
    )
    return link


@job(queue="reports")
def build_report(user: str, n: int) -> str:
    """Build report ``n`` of ``user`` (here: record that it ran, for the run-order demo)."""
    redis_client().rpush(demo_key(REPORT_ORDER), f"{user} {n}")
    return f"report {n} of {user}"


def enqueue_report(user: str, n: int, *, priority: int = 0) -> Job[Any]:
    """Queue report ``n`` of ``user`` in the user's group.

    Jobs of one group run in order; groups of the same priority take turns
    (round-robin), so a user with many reports does not starve the others.
    """
    return build_report.using(group=f"user:{user}", priority=priority).delay(user, n)


@job(max_attempts=3, backoff=quick_retry)
def flaky(token: str) -> str:
    """Fail on the first two calls for ``token``, succeed on the third."""
    client = redis_client()
    key = demo_key(f"flaky:{token}")
    calls = client.incr(key)
    client.expire(key, 3600)
    if calls <= 2:
        raise ConnectionError(f"simulated outage (call {calls})")
    return f"succeeded on call {calls}"


@job(max_attempts=2, backoff=quick_retry)
def always_fails() -> None:
    """Raise every time: ends in the failed store after two attempts."""
    raise RuntimeError("this job always fails")


@job(timeout=30, max_attempts=3, backoff=quick_retry)
async def check_page(url: str) -> dict[str, Any]:
    """Fetch ``url`` (a page of this very site) and return its status and size.

    An ``async def`` job: a worker runs up to ``--async-concurrency`` of these
    at once on one event loop, each awaiting its HTTP call.
    """
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.get(url)
    return {"url": url, "status": response.status_code, "bytes": len(response.content)}
