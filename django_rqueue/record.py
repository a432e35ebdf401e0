"""Reading a stored job record's fields tolerantly: numbers, times and error records that are
missing or malformed read as a default, and what is wrong is noted (:attr:`.Job.problems`)
instead of raised, so one corrupt record never breaks a page or a worker."""

from __future__ import annotations

import datetime
import math

from .engine.connection import as_text, ms_to_datetime
from .engine.fields import RECORD_DEFAULTS, JobFields
from .serialization import loads

#: The job hash's fixed field names as Redis returns them (bytes), and as text.
FIELD_NAMES: dict[bytes, str] = {
    value.encode(): value
    for name, value in vars(JobFields).items()
    if name.isupper() and isinstance(value, str)
}
#: What a field left out at its default reads as (:data:`~.engine.fields.RECORD_DEFAULTS`).
DEFAULT_MAX_ATTEMPTS = RECORD_DEFAULTS[JobFields.MAX_ATTEMPTS]
DEFAULT_TIMEOUT_MS = RECORD_DEFAULTS[JobFields.TIMEOUT_MS]
DEFAULT_RESULT_TTL = RECORD_DEFAULTS[JobFields.RESULT_TTL]


#: The longest ``timeout`` a job is read with, in seconds (about 3 years): a record's
#: ``tmo`` above it (a corrupt record, or a huge ``@job(timeout=...)``) reads as this. The
#: worker arms ``setitimer`` with it, which refuses values not far above (``OverflowError``
#: from 10^12 s on Linux x86-64), and it stays below 2^31 s for a 32-bit ``time_t``.
MAX_TIMEOUT = 100_000_000
MAX_TIMEOUT_MS = MAX_TIMEOUT * 1000


def integer(value: bytes | str | None, default: int = 0) -> int:
    """``value`` as an integer; ``default`` when absent or not an integer."""
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def number(f: dict[str, bytes | str], name: str, default: int, problems: list[str]) -> int:
    """The number field ``name`` of a job hash: an integer (a finite float is truncated);
    ``default`` when absent or empty, and when not a number (noted in ``problems``)."""
    value = f.get(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        pass
    if value in (b"", ""):
        return default
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if math.isfinite(number):
        return int(number)
    problems.append(f"field {name!r} is not a number: {as_text(value)[:40]!r}")
    return default


def time(f: dict[str, bytes | str], name: str, problems: list[str]) -> datetime.datetime | None:
    """The time field ``name`` (ms since the epoch); ``None`` when absent or not a time
    (then noted in ``problems``)."""
    value = f.get(name)
    when = ms_to_datetime(value)
    if when is None and value:
        problems.append(f"field {name!r} is not a time: {as_text(value)[:40]!r}")
    return when


def error_record(raw: bytes | str, problems: list[str]) -> dict[str, str]:
    """An error record (``err:<n>``, ``error``): ``type``, ``message``, ``traceback`` and,
    when recorded, ``worker``; undecodable, its raw text as the message (noted)."""
    try:
        value = loads(raw)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        problems.append("undecodable error record")
        return {"type": "", "message": as_text(raw), "traceback": ""}
    error = {k: str(value.get(k, "")) for k in ("type", "message", "traceback")}
    if "worker" in value:
        error["worker"] = str(value["worker"])
    return error
