"""A job's headers: the ``str -> str`` map a job carries besides its arguments (trace
context, a tenant, a request id), validated, encoded into and decoded from its record.

Headers are written at enqueue by ``RQUEUE["MIDDLEWARE"]``
(:meth:`~django_rqueue.middleware.JobMiddleware.enqueue`), stored as one JSON field of
the job record (:attr:`~django_rqueue.engine.fields.JobFields.HEADERS`, left out when
there are none) and read back as :attr:`Job.headers <django_rqueue.job.Job.headers>`;
they are never passed to the job function. As in AMQP message headers and Kafka record
headers, which OpenTelemetry's messaging instrumentations use to carry ``traceparent``,
names and values are text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

#: The most bytes a job's headers take, as their JSON (UTF-8): 8 KiB, the limit many HTTP
#: servers put on a request's header section (nginx's ``large_client_header_buffers``
#: default, 8k), far above what trace context needs (a W3C ``traceparent`` is 55
#: characters, a ``tracestate`` at most 512).
MAX_HEADERS_BYTES = 8192


class InvalidHeaders(ValueError):  # noqa: N818 - reads as the problem, like ValueError
    """Headers that are not a ``str -> str`` mapping, or larger than
    :data:`MAX_HEADERS_BYTES`; the message names the header concerned."""


def encode(headers: Mapping[str, str], job_name: str) -> str:
    """``headers`` as the record stores them (compact JSON); ``""`` for none.

    Raises:
        InvalidHeaders: a name or a value is not a ``str`` (the message names it and its
            type), or the JSON is larger than :data:`MAX_HEADERS_BYTES`.
    """
    if not headers:
        return ""
    for name, value in headers.items():
        if type(name) is not str:
            raise InvalidHeaders(
                f"the headers of {job_name} must have str names, got {type(name).__name__} "
                f"{name!r:.80}"
            )
        if type(value) is not str:
            raise InvalidHeaders(
                f"the header {name!r:.80} of {job_name} must be a str, got "
                f"{type(value).__name__} {value!r:.80}"
            )
    text = json.dumps(dict(headers), ensure_ascii=False, separators=(",", ":"))
    size = len(text.encode("utf-8"))
    if size > MAX_HEADERS_BYTES:
        raise InvalidHeaders(
            f"the headers of {job_name} take {size} bytes as JSON, more than "
            f"{MAX_HEADERS_BYTES}: carry ids in headers and the data elsewhere"
        )
    return text


def decode(raw: bytes | str, problems: list[str]) -> dict[str, str]:
    """A record's headers field as a dict; ``{}`` (and a note in ``problems``) when it is
    not a JSON object of text (a corrupt record). Never raises."""
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        problems.append(f"undecodable headers: {exc}")
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        problems.append("undecodable headers: not an object of text values")
        return {}
    return value
