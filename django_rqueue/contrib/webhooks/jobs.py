"""The webhook delivery job: POST a JSON body to a URL until the receiver accepts it.

What a response means (as in many notification services: "an empty reply retries; a reply
matching the retry condition retries"; the status rules are those of GitHub's and Stripe's
webhook senders and of RFC 9110):

- a connection error, a timeout, ``408``, ``429`` or ``5xx``: the attempt fails
  and the job retries with its backoff (``"odd_minutes"``: 1, 3, 5, ... minutes;
  a ``Retry-After`` of ``429``/``503`` in seconds is honoured instead, capped at
  :data:`MAX_RETRY_AFTER`); after ``max_attempts`` (10 by default) the
  job goes to the failed store;
- any other ``4xx``: the receiver refuses this request, so the job fails at
  once (:class:`~django_rqueue.Reject`), no retries;
- ``2xx`` (redirects are not followed: ``3xx`` fails at once too): delivered;
- a destination that is not a public address, unless allowed by
  ``RQUEUE["WEBHOOKS"]["ALLOWED_HOSTS"]``: the job fails at once
  (:class:`~.network.DestinationRefused`, checked on every address the host resolves to,
  at connect time: :mod:`.network`).

``timeout`` (seconds) bounds the whole attempt, wall-clock: resolving the name, connecting,
sending and reading the reply (a reply still arriving then is a timeout, and retries).
Only the first ``RQUEUE["WEBHOOKS"]["MAX_RESPONSE_BYTES"]`` bytes of a reply's body are
read (64 KiB by default, :mod:`.webhooks.conf`); the rest is never read, so a huge reply cannot
fill the worker's memory.

A job declared with :func:`webhook_job` and ``retry_if`` decides instead: its
callable gets each ``httpx.Response`` (with at most ``MAX_RESPONSE_BYTES`` of its body,
as received); ``True`` retries, ``False`` accepts a
``2xx`` and fails any other status at once. Connection errors always retry.

Each request carries ``Content-Type: application/json``, ``User-Agent:
django-rqueue``, ``X-Rqueue-Delivery`` (the job id, the same on every attempt,
for the receiver to drop duplicates: delivery is at least once) and
``X-Rqueue-Attempt`` (from 1). The body is the payload as JSON; with ``secret``
it is the envelope ``{"id": <delivery id>, "attempt": <from 1>, "data": <payload>}``
signed in ``X-Rqueue-Signature`` (:mod:`.signing`), so the delivery id and the attempt
are covered by the signature. The caller's ``headers`` add to these and cannot
replace them (:func:`check_headers` refuses their names at ``.delay()``). The
``secret`` and ``headers`` travel in the job's arguments, declared sensitive: the
admin, ``rqueue_failed`` and the logs show ``********`` in their place; whoever reads
Redis reads them unless ``RQUEUE["ENCRYPTION_KEYS"]`` is set.
"""

from __future__ import annotations

import datetime
import email.utils
import functools
import inspect
import json
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, NotRequired, TypedDict, Unpack
from urllib.parse import urlsplit, urlunsplit

import httpx

from ... import registry
from ...backoff import BackoffPolicy
from ...context import JobContext
from ...decorators import job
from ...exceptions import Reject, Retry, RqueueError
from ...job import Job
from ...job_functions import ContextJobFunction
from .conf import WebhookSettings, webhook_settings
from .network import deadline, guarded_client
from .signing import SIGNATURE_HEADER, sign

#: Seconds: the longest ``Retry-After`` honoured (a longer one waits this long).
MAX_RETRY_AFTER = 3600.0
#: Statuses that retry, besides ``5xx`` (RFC 9110 §15.5.9 Request Timeout, RFC 6585 §4
#: Too Many Requests).
RETRY_STATUSES = frozenset({408, 429})
#: Statuses whose ``Retry-After`` header sets the delay (RFC 9110 §10.2.3).
RETRY_AFTER_STATUSES = frozenset({429, 503})
#: The methods a delivery may use.
Method = Literal["POST", "PUT", "PATCH"]
METHODS: frozenset[str] = frozenset({"POST", "PUT", "PATCH"})

RetryCondition = Callable[[httpx.Response], bool]

#: Header names a delivery sets itself or that belong to the HTTP framing (lower case);
#: any ``X-Rqueue-*`` name is reserved as well. A caller's ``headers`` may not use them.
RESERVED_HEADERS = frozenset(
    {
        "content-type",
        "content-length",
        "content-encoding",
        "transfer-encoding",
        "accept-encoding",
        "connection",
        "host",
        "te",
        "upgrade",
        "user-agent",
    }
)
RESERVED_PREFIX = "x-rqueue-"
#: A header name: an RFC 9110 §5.1 token.
HEADER_NAME_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
#: A character a header value may not hold: RFC 9110 §5.5 allows visible characters,
#: spaces and horizontal tabs only (no CR, LF, NUL or other control character).
HEADER_VALUE_FORBIDDEN_RE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


class DeliveryError(RqueueError):
    """The attempt failed and the job retries (connection error, timeout, or a response
    the retry condition retries); the message names the URL and the status or error."""


class InvalidDeliveryError(ValueError):
    """A delivery's arguments are wrong (raised by ``.delay()``, nothing is written)."""


class Delivered(TypedDict):
    """A delivery's result: the accepted response's ``status`` and ``elapsed_ms``."""

    status: int
    elapsed_ms: float


class JobOptions(TypedDict):
    """``@job`` options :func:`webhook_job` passes on."""

    queue: NotRequired[str | None]
    priority: NotRequired[int]
    timeout: NotRequired[float | None]
    max_attempts: NotRequired[int | None]
    backoff: NotRequired[BackoffPolicy | None]
    result_ttl: NotRequired[int | None]
    sensitive: NotRequired[Iterable[str]]


_client: tuple[int, WebhookSettings, httpx.Client] | None = None


def _http(settings: WebhookSettings) -> httpx.Client:
    """This process's client for these settings (connections reused between deliveries;
    a forked child, or a change of the settings, makes a new one)."""
    global _client
    if _client is None or _client[:2] != (os.getpid(), settings):
        if _client is not None and _client[0] == os.getpid():
            _client[2].close()
        _client = (os.getpid(), settings, guarded_client(settings))
    return _client[2]


@functools.cache
def _delivery() -> inspect.Signature:
    """The arguments a delivery takes: the delivery job's, without its context."""
    parameters = list(inspect.signature(_make(None)).parameters.values())
    return inspect.Signature(parameters[1:])


def check_delivery(args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    """Validate a delivery's ``(url, payload, *, headers, secret, timeout, method)``.

    Raises:
        InvalidDeliveryError: naming the argument: ``url`` not an absolute http(s) URL,
            ``headers`` refused by :func:`check_headers`, ``secret`` not a non-empty str
            or a non-empty list of them (several while a secret is rotated),
            ``timeout`` not a number > 0 (seconds), ``method`` not POST/PUT/PATCH,
            or an unknown keyword.
        TypeError: the arguments do not fit ``(url, payload)``.
    """
    unknown = set(kwargs) - set(_delivery().parameters)
    if unknown:
        raise InvalidDeliveryError(f"unknown delivery options: {', '.join(sorted(unknown))}")
    try:
        kwargs = _delivery().bind(*args, **kwargs).arguments
    except TypeError as exc:
        raise TypeError(
            f"a delivery takes (url, payload), as positional or keyword arguments: {exc}"
        ) from None
    url = kwargs["url"]
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidDeliveryError(f"url must be an absolute http(s) URL, got {url!r}")
    try:
        httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise InvalidDeliveryError(f"url {url!r} is not a valid URL: {exc}") from None
    check_headers(kwargs.get("headers"))
    secret = kwargs.get("secret")
    if secret is not None and not (
        (isinstance(secret, str) and secret)
        or (
            isinstance(secret, list | tuple)
            and secret
            and all(isinstance(each, str) and each for each in secret)
        )
    ):
        raise InvalidDeliveryError("secret must be a non-empty str or a list of them")
    timeout = kwargs.get("timeout", 10.0)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise InvalidDeliveryError(f"timeout must be a number of seconds > 0, got {timeout!r}")
    method = kwargs.get("method", "POST")
    if method not in METHODS:
        raise InvalidDeliveryError(
            f"method must be one of {', '.join(sorted(METHODS))}, got {method!r}"
        )


def _reserved(name: str) -> bool:
    lowered = name.lower()
    return lowered in RESERVED_HEADERS or lowered.startswith(RESERVED_PREFIX)


def check_headers(headers: object) -> None:
    """Validate a delivery's extra ``headers`` (``None`` or a mapping of str to str).

    Raises:
        InvalidDeliveryError: naming the header: not a mapping of str to str; a name that
            is not an RFC 9110 token; a value with a CR, LF, NUL or other control character
            (a tab is allowed); a name the delivery sets itself or that belongs to the HTTP
            framing (:data:`RESERVED_HEADERS`, any ``X-Rqueue-*``; compared case-insensitively).
    """
    if headers is None:
        return
    if not isinstance(headers, Mapping):
        raise InvalidDeliveryError(f"headers must map str to str, got {headers!r}")
    for name, value in headers.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise InvalidDeliveryError(
                f"headers must map str to str, got {name!r}: {type(value).__name__}"
            )
        if not HEADER_NAME_RE.match(name):
            raise InvalidDeliveryError(f"header name {name!r} is not a valid HTTP token")
        if HEADER_VALUE_FORBIDDEN_RE.search(value):
            raise InvalidDeliveryError(
                f"header {name!r}: its value holds a control character (CR, LF, NUL...)"
            )
        if _reserved(name):
            raise InvalidDeliveryError(
                f"header {name!r} is set by the delivery itself and cannot be given"
            )


class WebhookJob(ContextJobFunction[..., Delivered]):
    """A delivery job: ``.delay(url, payload, *, headers=None, secret=None, timeout=10.0,
    method="POST")``; the arguments are checked first (:func:`check_delivery`)."""

    def delay(self, *args: Any, **kwargs: Any) -> Job[Delivered]:
        """Check the delivery (:func:`check_delivery`), then enqueue it (``JobFunction.delay``)."""
        check_delivery(args, kwargs)
        return super().delay(*args, **kwargs)

    async def adelay(self, *args: Any, **kwargs: Any) -> Job[Delivered]:
        """:meth:`delay` for async code."""
        check_delivery(args, kwargs)
        return await super().adelay(*args, **kwargs)

    def delay_many(
        self, calls: Iterable[tuple[Sequence[Any], Mapping[str, Any]]], *, batch_size: int = 500
    ) -> list[Job[Delivered]]:
        """Check every delivery, then enqueue them (``JobFunction.delay_many``)."""
        checked = list(calls)
        for index, call in enumerate(checked):
            try:
                check_delivery(*call)
            except (InvalidDeliveryError, TypeError) as exc:
                raise type(exc)(f"call {index}: {exc}") from None
        return super().delay_many(checked, batch_size=batch_size)


def _retry_after(response: httpx.Response) -> float | None:
    """Seconds from ``Retry-After`` (delay-seconds or an HTTP-date), capped; ``None`` if absent
    or unreadable."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return min(float(value), MAX_RETRY_AFTER)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    seconds = (when - datetime.datetime.now(datetime.UTC)).total_seconds()
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


def _without_userinfo(url: str) -> str:
    """``url`` without a user name and password (``https://user:pw@host/`` gives
    ``https://host/``)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def _bounded(response: httpx.Response, limit: int) -> httpx.Response:
    """``response`` with at most ``limit`` bytes of its body, as received (not decoded:
    deliveries ask for ``Accept-Encoding: identity``, and its ``Content-Encoding`` header is
    dropped); the rest of the body is never read (the connection is closed, not reused)."""
    kept = bytearray()
    if limit > 0:
        for chunk in response.iter_raw():
            kept += chunk
            if len(kept) >= limit:
                break
    return httpx.Response(
        response.status_code,
        headers=[
            (name, value)
            for name, value in response.headers.multi_items()
            if name.lower() != "content-encoding"
        ],
        content=bytes(kept[:limit]),
        request=response.request,
    )


def default_retry_condition(response: httpx.Response) -> bool:
    """``True`` for ``408``, ``429`` and ``5xx`` (module docstring)."""
    return response.status_code in RETRY_STATUSES or response.status_code >= 500


def _make(retry_if: RetryCondition | None) -> Callable[..., Delivered]:
    should_retry = retry_if or default_retry_condition

    def deliver(
        context: JobContext,
        url: str,
        payload: Any,
        *,
        headers: Mapping[str, str] | None = None,
        secret: str | Sequence[str] | None = None,
        timeout: float = 10.0,
        method: Method = "POST",
    ) -> Delivered:
        """Send ``payload`` as JSON to ``url``; see :mod:`django_rqueue.contrib.webhooks.jobs`."""
        sent_payload = (
            payload
            if secret is None
            else {"id": context.job.id, "attempt": context.attempt, "data": payload}
        )
        body = json.dumps(sent_payload, separators=(",", ":")).encode()
        where = f"{method} {_without_userinfo(url)}"  # for messages, kept in the failed store
        # The caller's headers first, without any reserved name (a job enqueued before they
        # were refused at .delay(), or written to Redis by hand); the delivery's own then
        # replace any case variant. A header that could never be sent fails at once.
        extra = {k: v for k, v in (headers or {}).items() if not _reserved(k)}
        try:
            check_headers(extra)
        except InvalidDeliveryError as exc:
            raise Reject(f"{where}: {exc}, not retried") from None
        sent = httpx.Headers(extra)
        sent.update(
            {
                "Content-Type": "application/json",
                "User-Agent": "django-rqueue",
                "X-Rqueue-Delivery": context.job.id,
                "X-Rqueue-Attempt": str(context.attempt),
                "Accept-Encoding": "identity",
            }
        )
        if secret is not None:
            sent[SIGNATURE_HEADER] = sign(body, secret)
        settings = webhook_settings()
        started = time.monotonic()
        try:
            with (
                deadline(timeout),
                _http(settings).stream(
                    method, url, content=body, headers=sent, timeout=timeout
                ) as streamed,
            ):
                response = _bounded(streamed, settings.max_response_bytes)
        except httpx.TimeoutException as exc:
            raise DeliveryError(
                f"{where}: no complete response within the total timeout of "
                f"{timeout:g} s ({type(exc).__name__}: {exc})"
            ) from exc
        except httpx.HTTPError as exc:  # connection refused, DNS, TLS
            raise DeliveryError(f"{where}: {type(exc).__name__}: {exc}") from exc
        elapsed = time.monotonic() - started
        status = response.status_code
        if should_retry(response):
            delay = _retry_after(response) if status in RETRY_AFTER_STATUSES else None
            if delay is not None:
                raise Retry(delay=delay, reason=f"{where}: HTTP {status}")
            raise DeliveryError(f"{where}: HTTP {status}")
        if not 200 <= status < 300:
            raise Reject(f"{where}: HTTP {status}, not retried")
        return {"status": status, "elapsed_ms": elapsed * 1000}

    return deliver


def webhook_job(
    *, name: str, retry_if: RetryCondition | None = None, **options: Unpack[JobOptions]
) -> WebhookJob:
    """Declare a delivery job named ``name`` (put it in one of your apps' ``jobs`` modules,
    so workers register it); ``options`` are ``@job``'s (defaults: ``backoff="odd_minutes"``,
    ``max_attempts=10``, ``sensitive=("headers", "secret")``: people see neither in the
    admin, ``rqueue_failed`` or the logs).

    ``retry_if(response) -> bool`` replaces the default retry rule (module docstring);
    it runs in the worker, is never stored in Redis, and an exception it raises fails
    the attempt like any other.

    Raises:
        ValueError: as ``@job`` for a bad option, or ``retry_if`` is not callable.
    """
    if retry_if is not None and not callable(retry_if):
        raise ValueError(f"retry_if must be a callable (response) -> bool, got {retry_if!r}")
    options.setdefault("backoff", "odd_minutes")
    options.setdefault("max_attempts", 10)
    options.setdefault("sensitive", ("headers", "secret"))
    declared = job(takes_context=True, name=name, **options)(_make(retry_if))
    delivery = WebhookJob(declared.func, declared.name, declared.options)
    delivery.sensitive = declared.sensitive
    registry.register(delivery)
    return delivery


#: The built-in delivery job (default retry rule, ``"odd_minutes"`` backoff, 10 attempts).
deliver = webhook_job(name="django_rqueue.contrib.webhooks.deliver")
