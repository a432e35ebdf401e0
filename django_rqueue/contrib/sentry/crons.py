"""Periodic entries as Sentry cron monitors: the check-in a tick opens and its run closes.

The convention is Sentry's own Celery Beat integration's
(``sentry_sdk/integrations/celery/beat.py``): the process that enqueues a tick sends an
``in_progress`` check-in, with the monitor's configuration built from the schedule
(Sentry creates or updates the monitor from it), and puts the monitor slug, the
check-in id and the start time in the job's headers; the worker sends ``ok`` or
``error`` with the same id and the time since the tick was enqueued as duration.
Check-ins: docs.sentry.io/platforms/python/crons/ and sentry-sdk's
``sentry_sdk.crons.capture_checkin``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from sentry_sdk.crons import MonitorStatus, capture_checkin

from ...periodic.entries import ScheduleEntry, Trigger

if TYPE_CHECKING:
    from sentry_sdk._types import MonitorConfig, MonitorConfigScheduleUnit

#: Header: the monitor's slug.
SLUG_HEADER = "sentry-monitor-slug"
#: Header: the id of the ``in_progress`` check-in of the tick.
CHECK_IN_HEADER = "sentry-monitor-check-in-id"
#: Header: when the tick was enqueued, Unix time in seconds (a float as text).
START_HEADER = "sentry-monitor-start-timestamp-s"

#: Sentry's monitor slugs: lower-case letters, digits, ``-`` and ``_``, at most 50.
SLUG_LENGTH = 50
_NOT_SLUG = re.compile(r"[^a-z0-9_-]+")
#: Interval units of a monitor schedule, largest first, with their length in seconds
#: (Sentry has no unit below the minute).
_UNITS: tuple[tuple[MonitorConfigScheduleUnit, int], ...] = (
    ("week", 7 * 24 * 3600),
    ("day", 24 * 3600),
    ("hour", 3600),
    ("minute", 60),
)
#: A crontab field Sentry reads as cronsim does: ``*``, numbers, ranges, steps, lists
#: (cronsim's extensions ``L``, ``W``, ``#``, ``?`` and names are left out).
_PORTABLE_FIELD = re.compile(r"[0-9*,/-]+")


def monitor_slug(entry: str) -> str:
    """The monitor slug of periodic entry ``entry``: its name in lower case with every run
    of other characters than letters, digits, ``-`` and ``_`` made one ``-``, cut to
    :data:`SLUG_LENGTH` characters (``"Nightly.Digest"`` -> ``"nightly-digest"``)."""
    return _NOT_SLUG.sub("-", entry.lower()).strip("-")[:SLUG_LENGTH] or "rqueue-entry"


def monitor_config(entry: ScheduleEntry) -> MonitorConfig | None:
    """The monitor configuration of ``entry``'s schedule; ``None`` when Sentry cannot
    express it (an ``every`` that is not a whole number of minutes, a cron expression
    using cronsim's extensions).

    ``every`` gives an ``interval`` schedule in the largest unit that divides it; a cron
    expression a ``crontab`` schedule with the entry's time zone.
    """
    if entry.trigger is Trigger.EVERY:
        for unit, seconds in _UNITS:
            if entry.every % seconds == 0:
                return {
                    "schedule": {"type": "interval", "value": entry.every // seconds, "unit": unit}
                }
        return None
    if not all(_PORTABLE_FIELD.fullmatch(field) for field in entry.cron.split()):
        return None
    return {"schedule": {"type": "crontab", "value": entry.cron}, "timezone": entry.zone.key}


def open_check_in(entry: ScheduleEntry, *, with_config: bool) -> dict[str, str]:
    """Send the ``in_progress`` check-in of a tick of ``entry`` (with its monitor
    configuration when ``with_config`` and it has one); the headers that carry it to the
    job's attempts."""
    slug = monitor_slug(entry.name)
    config = monitor_config(entry) if with_config else None
    started = time.time()
    check_in_id = capture_checkin(
        monitor_slug=slug, monitor_config=config, status=MonitorStatus.IN_PROGRESS
    )
    headers = {SLUG_HEADER: slug, START_HEADER: repr(started)}
    if check_in_id:
        headers[CHECK_IN_HEADER] = check_in_id
    return headers


def close_check_in(headers: Mapping[str, str], *, ok: bool) -> None:
    """Send the ``ok`` or ``error`` check-in of the tick whose job carries ``headers``
    (nothing when they carry no check-in); the duration is counted from the tick's
    enqueue, in seconds."""
    slug, check_in_id = headers.get(SLUG_HEADER), headers.get(CHECK_IN_HEADER)
    if not slug or not check_in_id:
        return
    try:
        duration: float | None = max(0.0, time.time() - float(headers.get(START_HEADER, "")))
    except ValueError:
        duration = None
    capture_checkin(
        monitor_slug=slug,
        check_in_id=check_in_id,
        status=MonitorStatus.OK if ok else MonitorStatus.ERROR,
        duration=duration,
    )
