"""The options of a ``@job`` or of one ``using()`` call (:class:`JobOptions`), validated.

Pure data, below everything that builds options (``@job``, ``using()``, the
``django.tasks`` backend, periodic entries) and everything that reads them
(enqueue). :mod:`django_rqueue.decorators` re-exports :class:`JobOptions`.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from collections.abc import Callable

from .backoff import BackoffPolicy
from .conf import BACKOFF_NAMES
from .engine.keys import ID_PART_RE

#: ``priority`` bounds, as in ``django.tasks``: higher runs first.
MIN_PRIORITY, MAX_PRIORITY = -100, 100
#: Longest accepted ``group`` / ``unique_key`` string.
MAX_NAME_LENGTH = 200


@dataclasses.dataclass(frozen=True)
class JobOptions:
    """Options of a ``@job`` or of one ``using()`` call; ``None`` = inherit.

    Resolution, first set wins: ``using()``, ``@job(...)``, the queue's entry
    in ``RQUEUE["QUEUES"]``, ``RQUEUE["DEFAULTS"]``, the built-in defaults.
    """

    queue: str | None = None
    priority: int | None = None
    #: Seconds.
    timeout: float | None = None
    max_attempts: int | None = None
    backoff: BackoffPolicy | None = None
    #: Seconds a finished job's record (and result) is kept.
    result_ttl: int | None = None
    #: A string, or a callable given the job's arguments that returns one.
    unique_key: str | Callable[..., str] | None = None
    #: Seconds after which a unique key is released even if its job is pending.
    unique_ttl: int | None = None
    group: str | None = None
    #: Seconds from now (Redis clock); ``using()`` converts a ``timedelta``.
    delay: float | None = None
    run_at: datetime.datetime | None = None
    on_commit: bool | None = None
    #: When the job expires if no worker has started it, in seconds from the enqueue (Redis
    #: clock; ``using()`` and ``@job`` convert a ``timedelta``) or as an aware datetime.
    expires: float | datetime.datetime | None = None
    #: A caller-chosen id (``using()`` only): the job's id is ``"<queue>:<job_id>"``, and
    #: enqueueing it again while its record exists writes nothing (an idempotent retry).
    job_id: str | None = None

    def __post_init__(self) -> None:
        _validate(self)

    def merged(self, other: JobOptions) -> JobOptions:
        """Return these options with every field ``other`` sets overriding them."""
        changes = {
            f.name: getattr(other, f.name)
            for f in dataclasses.fields(other)
            if getattr(other, f.name) is not None
        }
        return dataclasses.replace(self, **changes)


def _number(name: str, value: object, *, minimum: float, integer: bool = False) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or (integer and not isinstance(value, int))
        or value < minimum
    ):
        kind = "an integer" if integer else "a number"
        raise ValueError(f"{name} must be {kind} >= {minimum}, got {value!r}")


def _validate(o: JobOptions) -> None:  # one check per option
    if o.priority is not None:
        if isinstance(o.priority, bool) or not isinstance(o.priority, int):
            raise ValueError(f"priority must be an integer, got {o.priority!r}")
        if not MIN_PRIORITY <= o.priority <= MAX_PRIORITY:
            raise ValueError(f"priority must be between -100 and 100, got {o.priority}")
    if o.queue is not None and not isinstance(o.queue, str):
        raise ValueError(f"queue must be a str, got {o.queue!r}")
    if o.timeout is not None:
        _number("timeout", o.timeout, minimum=0.001)
    if o.max_attempts is not None:
        _number("max_attempts", o.max_attempts, minimum=1, integer=True)
    if o.result_ttl is not None:
        _number("result_ttl", o.result_ttl, minimum=0, integer=True)
    if o.unique_ttl is not None:
        _number("unique_ttl", o.unique_ttl, minimum=1, integer=True)
    if o.backoff is not None and not callable(o.backoff) and o.backoff not in BACKOFF_NAMES:
        names = ", ".join(sorted(BACKOFF_NAMES))
        raise ValueError(f"backoff must be one of {names} or a callable, got {o.backoff!r}")
    for name in ("group", "unique_key"):
        value = getattr(o, name)
        if value is None or (name == "unique_key" and callable(value)):
            continue
        if not isinstance(value, str) or len(value) > MAX_NAME_LENGTH:
            raise ValueError(f"{name} must be a str of at most {MAX_NAME_LENGTH} characters")
    if o.delay is not None:
        _number("delay", o.delay, minimum=0)
    if o.run_at is not None and not isinstance(o.run_at, datetime.datetime):
        raise ValueError(f"run_at must be a datetime, got {o.run_at!r}")
    if o.on_commit is not None and not isinstance(o.on_commit, bool):
        raise ValueError("on_commit must be True or False")
    if o.expires is not None:
        _validate_expires(o.expires)
    if o.job_id is not None and (not isinstance(o.job_id, str) or not ID_PART_RE.match(o.job_id)):
        raise ValueError(
            "job_id must be 1 to 128 of the characters A-Z a-z 0-9 _ . - : "
            f"(the queue and a ':' are put before it), got {o.job_id!r}"
        )


def _validate_expires(expires: object) -> None:
    """``expires``: an aware datetime, or a finite number of seconds > 0 (``ValueError``)."""
    if isinstance(expires, datetime.datetime):
        if expires.utcoffset() is None:
            raise ValueError(
                f"expires must be an aware datetime (with a time zone), got the naive {expires!r}"
            )
        return
    if (
        isinstance(expires, bool)
        or not isinstance(expires, int | float)
        or not math.isfinite(expires)
        or expires <= 0
    ):
        raise ValueError(
            "expires must be a number of seconds > 0, a positive timedelta or an aware "
            f"datetime, got {expires!r}"
        )


def expires_value(
    value: float | datetime.timedelta | datetime.datetime | None,
) -> float | datetime.datetime | None:
    """``expires`` as :class:`JobOptions` keeps it: a ``timedelta`` becomes seconds."""
    return value.total_seconds() if isinstance(value, datetime.timedelta) else value
