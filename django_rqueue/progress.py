"""A running job's progress and metadata: the :class:`Progress` value, their bounds, and the
fenced writes behind ``JobContext.set_progress`` and ``JobContext.save_metadata``.

Both live in the job's record (fields ``progress``, ``progress_at`` and ``metadata``), so
any process reads them with the job (:attr:`.Job.progress`, :attr:`.Job.metadata`) while
it runs and after it ended, for as long as the record is kept (``result_ttl``). Only the
attempt that holds the job's lease writes: each write is one script call fenced by the
job's token (``progress.lua``, ``save_metadata.lua``, as ``renew.lua``), so an attempt
whose lease was reclaimed gets :class:`~django_rqueue.exceptions.LeaseLost` and changes
nothing. A job run without a lease (EAGER mode) keeps them on its in-memory Job.

Each write is one round trip, never rate-limited here: a skipped write would leave a
stale value in the record once the job ended (a bar stuck at 97%). Celery's
``update_state``, RQ's ``save_meta`` and BullMQ's ``updateProgress`` write on every call
too; a caller in a tight loop reports every N items instead.
"""

from __future__ import annotations

import datetime
import json
import math
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async

from .encryption import seal, sealed, unseal
from .engine import run
from .engine.calls import ScriptCall
from .engine.commands import Command
from .engine.connection import as_text, get_async_client, ms_to_datetime
from .engine.fields import JobFields
from .engine.queue_ref import queue_ref
from .engine.replies import Reply, items, number, stale_lease, text

#: The longest metadata a job may save: its JSON, in UTF-8 bytes (64 KiB). It is read
#: with the whole record each time the job is, by every page and poll that shows it.
MAX_METADATA_BYTES = 64 * 1024
#: The longest progress message, in characters.
MAX_MESSAGE_LENGTH = 1000


@dataclass(frozen=True)
class Progress:
    """The latest progress a job reported (``JobContext.set_progress``).

    ``current`` and ``total`` are numbers >= 0 as given (``total`` ``None``: unknown);
    ``updated_at`` is when it was written (aware UTC: the Redis clock, or the local one in
    EAGER mode).
    """

    current: int | float
    total: int | float | None
    message: str
    updated_at: datetime.datetime | None

    @property
    def fraction(self) -> float | None:
        """``current / total`` within 0.0 .. 1.0; ``None`` without a ``total``."""
        if not self.total:
            return None
        return min(1.0, max(0.0, self.current / self.total))

    def __str__(self) -> str:
        """As people read it: ``"30 / 120 (25%) · importing"``, ``"7 · pages"`` without a
        total."""
        shown = f"{self.current:g}"
        if self.total is not None and self.fraction is not None:
            shown += f" / {self.total:g} ({self.fraction:.0%})"
        return f"{shown} · {self.message}" if self.message else shown

    def as_dict(self) -> dict[str, Any]:
        """``{"current", "total", "message", "fraction", "updated_at"}``, JSON-ready
        (``updated_at`` ISO 8601, UTC, or ``None``)."""
        return {
            "current": self.current,
            "total": self.total,
            "message": self.message,
            "fraction": self.fraction,
            "updated_at": self.updated_at.isoformat() if self.updated_at else None,
        }


def _number(name: str, value: object) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"progress {name} must be an int or a float, not {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"progress {name} must be a finite number >= 0, not {value!r}")
    return value


def encode_progress(current: object, total: object, message: object) -> str:
    """The JSON the record keeps for one progress report.

    Raises:
        TypeError: ``current`` or ``total`` is not an int or a float (a bool is refused),
            or ``message`` is not a str.
        ValueError: a number is negative, NaN or infinite, ``total`` is 0, or ``message``
            is longer than :data:`MAX_MESSAGE_LENGTH` characters.
    """
    current = _number("current", current)
    if total is not None:
        total = _number("total", total)
        if total == 0:
            raise ValueError("progress total must be > 0 (None: unknown)")
    if not isinstance(message, str):
        raise TypeError(f"progress message must be a str, not {type(message).__name__}")
    if len(message) > MAX_MESSAGE_LENGTH:
        raise ValueError(
            f"progress message of {len(message)} characters is longer than {MAX_MESSAGE_LENGTH}"
        )
    return json.dumps({"current": current, "total": total, "message": message})


def encode_metadata(metadata: object) -> str:
    """The JSON of ``metadata`` (encrypted under ``RQUEUE["ENCRYPTION_KEYS"]``), as stored.

    Raises:
        TypeError: ``metadata`` is not a dict with str keys, or holds a value JSON cannot
            carry (only dict, list, str, int, float, bool and None).
        ValueError: a float is NaN or infinite, or the JSON is longer than
            :data:`MAX_METADATA_BYTES` bytes.
    """
    if not isinstance(metadata, dict):
        raise TypeError(f"job metadata must be a dict, not {type(metadata).__name__}")
    bad = [key for key in metadata if not isinstance(key, str)]
    if bad:
        raise TypeError(f"job metadata keys must be str, not {bad[0]!r}")
    try:
        encoded = json.dumps(metadata, allow_nan=False, separators=(",", ":"))
    except TypeError as exc:
        raise TypeError(f"job metadata must be JSON: {exc}") from None
    except ValueError as exc:  # NaN, infinity, a value that contains itself
        raise ValueError(f"job metadata must be JSON: {exc}") from None
    size = len(encoded.encode())
    if size > MAX_METADATA_BYTES:
        raise ValueError(
            f"job metadata of {size} bytes of JSON is larger than {MAX_METADATA_BYTES} bytes"
        )
    return seal(encoded)


def read_progress(f: dict[str, bytes | str], problems: list[str]) -> Progress | None:
    """The :class:`Progress` in a job hash (``None``: none reported); never raises
    (undecodable: ``None``, noted in ``problems``)."""
    raw = f.get(JobFields.PROGRESS)
    if raw is None:
        return None
    try:
        value = json.loads(raw)
        current, total, message = value["current"], value["total"], value["message"]
        if not isinstance(message, str):
            raise TypeError(message)
        progress = Progress(
            _number("current", current),
            None if total is None else _number("total", total),
            message,
            ms_to_datetime(f.get(JobFields.PROGRESS_AT)),
        )
    except (ValueError, TypeError, KeyError):
        problems.append(f"undecodable progress: {as_text(raw)[:40]!r}")
        return None
    return progress


def read_metadata(f: dict[str, bytes | str], problems: list[str]) -> dict[str, Any]:
    """The metadata in a job hash (``{}``: none saved); never raises (undecodable, or
    encrypted with a key no longer configured: ``{}``, noted in ``problems``)."""
    raw = f.get(JobFields.METADATA)
    if raw is None:
        return {}
    try:
        value = json.loads(unseal(raw) if sealed(raw) else raw)
    except ValueError as exc:
        problems.append(f"undecodable metadata: {str(exc).format(what='metadata')}")
        return {}
    if not isinstance(value, dict):
        problems.append("undecodable metadata: not a JSON object")
        return {}
    return value


def _write_progress(queue: str, job_id: str, token: int, encoded: str) -> Command[int]:
    call = ScriptCall("progress", [queue_ref(queue).keys.job(job_id)], [token, encoded])
    return Command(call, lambda reply: _written_at(reply, job_id))


def _written_at(reply: Reply, job_id: str) -> int:
    got = items(reply)
    if text(got[0]) != "ok":
        raise stale_lease(job_id, reply)
    return number(got[1])


def _write_metadata(queue: str, job_id: str, token: int, encoded: str) -> Command[None]:
    call = ScriptCall("save_metadata", [queue_ref(queue).keys.job(job_id)], [token, encoded])
    return Command(call, lambda reply: _saved(reply, job_id))


def _saved(reply: Reply, job_id: str) -> None:
    if text(items(reply)[0]) != "ok":
        raise stale_lease(job_id, reply)


# A job run without a lease (EAGER mode) has token 0: a worker's reservations count from 1.


def set_progress(
    queue: str, job_id: str, token: int, current: object, total: object, message: object
) -> Progress:
    """Record a job's progress (see ``JobContext.set_progress``) and return it."""
    encoded = encode_progress(current, total, message)
    if token <= 0:
        return _decoded(encoded, datetime.datetime.now(datetime.UTC))
    written = run.execute(queue_ref(queue).client(), _write_progress(queue, job_id, token, encoded))
    return _decoded(encoded, ms_to_datetime(written))


async def aset_progress(
    queue: str, job_id: str, token: int, current: object, total: object, message: object
) -> Progress:
    """:func:`set_progress` without blocking the event loop (redis-py's asyncio client)."""
    encoded = encode_progress(current, total, message)
    client = get_async_client(queue) if token > 0 else None
    if client is None:
        write = sync_to_async(set_progress, thread_sensitive=False)
        return await write(queue, job_id, token, current, total, message)
    written = await run.aexecute(client, _write_progress(queue, job_id, token, encoded))
    return _decoded(encoded, ms_to_datetime(written))


def save_metadata(queue: str, job_id: str, token: int, metadata: object) -> None:
    """Write a job's metadata (see ``JobContext.save_metadata``); only checks it when
    ``token`` is 0 (EAGER)."""
    encoded = encode_metadata(metadata)
    if token > 0:
        run.execute(queue_ref(queue).client(), _write_metadata(queue, job_id, token, encoded))


async def asave_metadata(queue: str, job_id: str, token: int, metadata: object) -> None:
    """:func:`save_metadata` without blocking the event loop (redis-py's asyncio client)."""
    encoded = encode_metadata(metadata)
    client = get_async_client(queue) if token > 0 else None
    if client is None:
        if token > 0:
            await sync_to_async(save_metadata, thread_sensitive=False)(
                queue, job_id, token, metadata
            )
        return
    await run.aexecute(client, _write_metadata(queue, job_id, token, encoded))


def _decoded(encoded: str, at: datetime.datetime | None) -> Progress:
    value = json.loads(encoded)
    return Progress(value["current"], value["total"], value["message"], at)
