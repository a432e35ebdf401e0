"""The options of a ``@job`` or of one ``using()`` call (:class:`JobOptions`), validated.

Pure data, below everything that builds options (``@job``, ``using()``, the
``django.tasks`` backend, periodic entries) and everything that reads them
(enqueue). :mod:`django_rqueue.decorators` re-exports :class:`JobOptions`.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import math
from collections.abc import Callable, Iterable
from typing import Any, Final, Literal, TypedDict

from .backoff import BackoffPolicy
from .conf import BACKOFF_NAMES
from .engine.keys import ID_PART_RE, queue_of

#: ``priority`` bounds, as in ``django.tasks``: higher runs first.
MIN_PRIORITY, MAX_PRIORITY = -100, 100
#: Longest accepted ``group`` / ``unique_key`` string.
MAX_NAME_LENGTH = 200

#: What a dependent does when an input did not succeed: ``"cancel"`` (end ``cancelled``,
#: reason ``dependency_failed``) or ``"run"`` (run, a ``DependencyFailed`` in its place).
DependencyPolicy = Literal["cancel", "run"]
DEPENDENCY_POLICIES: Final = ("cancel", "run")


class NoTimeout(enum.Enum):
    """The type of :data:`NO_TIMEOUT`."""

    NO_TIMEOUT = "no_timeout"

    def __repr__(self) -> str:
        return "NO_TIMEOUT"


#: ``using(dependency_timeout=NO_TIMEOUT)``: the job waits for its inputs however long they
#: take (``None`` means "inherit ``RQUEUE['WORKFLOW_DEPENDENCY_TIMEOUT']``").
NO_TIMEOUT: Final = NoTimeout.NO_TIMEOUT


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
    #: Ids of the jobs this one waits for (``using()`` also takes :class:`Job` objects): it
    #: runs once every one of them has ended (after its last attempt).
    depends_on: tuple[str, ...] | None = None
    #: What it does when one of its inputs did not succeed (``None``: ``"cancel"``).
    on_dependency_failure: DependencyPolicy | None = None
    #: Whether its inputs' results are prepended to its arguments (``None``: ``False`` with
    #: ``depends_on``; a workflow node follows ``.s()`` / ``.si()``).
    pass_results: bool | None = None
    #: Seconds (Redis clock, from the creation) it waits for its inputs at most, then ends
    #: ``cancelled`` with reason ``dependency_timeout``; :data:`NO_TIMEOUT`: no limit;
    #: ``None``: ``RQUEUE["WORKFLOW_DEPENDENCY_TIMEOUT"]``. ``using()`` converts a ``timedelta``.
    dependency_timeout: float | NoTimeout | None = None

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
    _validate_dependencies(o)


def _validate_dependencies(o: JobOptions) -> None:
    """``depends_on``, ``on_dependency_failure``, ``pass_results``, ``dependency_timeout``."""
    if o.depends_on is not None:
        if not isinstance(o.depends_on, tuple):
            raise TypeError(f"depends_on must be a tuple of job ids, got {o.depends_on!r:.80}")
        for job_id in o.depends_on:
            if not isinstance(job_id, str) or queue_of(job_id) is None or " " in job_id:
                raise ValueError(
                    f"depends_on must list jobs or job ids ('<queue>:<id>'), got {job_id!r:.80}"
                )
    if o.on_dependency_failure not in (None, *DEPENDENCY_POLICIES):
        raise ValueError(
            f'on_dependency_failure must be "cancel" or "run", got {o.on_dependency_failure!r}'
        )
    if o.pass_results is not None and not isinstance(o.pass_results, bool):
        raise ValueError(f"pass_results must be True or False, got {o.pass_results!r}")
    timeout = o.dependency_timeout
    if timeout is not None and timeout is not NO_TIMEOUT:
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not math.isfinite(timeout)
            or timeout <= 0
        ):
            raise ValueError(
                "dependency_timeout must be a number of seconds > 0, a positive timedelta or "
                f"NO_TIMEOUT, got {timeout!r}"
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


def dependency_timeout_value(
    value: float | datetime.timedelta | NoTimeout | None,
) -> float | NoTimeout | None:
    """``dependency_timeout`` as :class:`JobOptions` keeps it: a ``timedelta`` becomes seconds."""
    return value.total_seconds() if isinstance(value, datetime.timedelta) else value


def depends_on_value(jobs: Iterable[object] | None) -> tuple[str, ...] | None:
    """``depends_on`` as :class:`JobOptions` keeps it: the ids of ``jobs`` (each a ``Job``, or
    anything with a text ``id``, or an id); ``None`` for ``None`` or no job at all.

    Raises:
        TypeError: ``jobs`` is a single id or job instead of a list of them.
    """
    if jobs is None:
        return None
    if isinstance(jobs, str | bytes) or hasattr(jobs, "id"):
        raise TypeError(f"depends_on takes a list of jobs or job ids, got {jobs!r:.80}")
    ids: list[Any] = [getattr(j, "id", j) for j in jobs]
    return tuple(ids) or None


class UsingOptions(TypedDict, total=False):
    """The keyword arguments of ``using()`` (on a job function, and on a signature)."""

    delay: float | datetime.timedelta | None
    run_at: datetime.datetime | None
    group: str | None
    priority: int | None
    queue: str | None
    unique_key: str | None
    unique_ttl: int | None
    timeout: float | None
    max_attempts: int | None
    result_ttl: int | None
    on_commit: bool | None
    expires: float | datetime.timedelta | datetime.datetime | None
    job_id: str | None
    depends_on: Iterable[Any] | None
    on_dependency_failure: DependencyPolicy | None
    pass_results: bool | None
    dependency_timeout: float | datetime.timedelta | NoTimeout | None


def using_options(**options: Any) -> JobOptions:
    """The :class:`JobOptions` of one ``using()`` call (see
    :meth:`django_rqueue.job_functions.BaseJobFunction.using`): ``timedelta`` values become
    seconds, ``depends_on``'s jobs their ids.

    Raises:
        TypeError: an unknown option name, or ``depends_on`` is not a list.
        ValueError: a bad value (the message names the option).
    """
    unknown = options.keys() - UsingOptions.__annotations__.keys()
    if unknown:
        raise TypeError(f"using() got unknown options: {', '.join(sorted(unknown))}")
    delay = options.pop("delay", None)
    if isinstance(delay, datetime.timedelta):
        delay = delay.total_seconds()
    return JobOptions(
        delay=delay,
        expires=expires_value(options.pop("expires", None)),
        depends_on=depends_on_value(options.pop("depends_on", None)),
        dependency_timeout=dependency_timeout_value(options.pop("dependency_timeout", None)),
        **options,
    )
