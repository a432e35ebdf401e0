"""``RQUEUE["SCHEDULE"]``: periodic job entries, their validation, and their ticks.

An entry names a registered job and when it runs, either a 5-field cron
expression evaluated in the entry's time zone or a period in seconds::

    RQUEUE = {
        "SCHEDULE": {
            "nightly-digest": {"job": "shop.jobs.send_digest", "cron": "30 2 * * *",
                               "timezone": "Europe/Paris", "kwargs": {"kind": "daily"}},
            "heartbeat": {"job": "shop.jobs.ping", "every": 60, "queue": "low"},
        },
    }

A *tick* is one instant the entry is due, in milliseconds since the Unix
epoch (UTC). ``every`` ticks are the multiples of ``every`` seconds since the
epoch; cron ticks are the matches of the expression in local time of the
entry's time zone, found with `cronsim <https://github.com/cuu508/cronsim>`_,
which follows Debian cron across DST changes: a daily job whose local time
is skipped by the spring change runs right after the gap (``30 2 * * *``
runs at 03:00 that day), and one whose local time repeats in autumn runs
once; jobs that run every hour or more often keep their plain rhythm.

This module only reads settings and computes; the poller's
:class:`~django_rqueue.worker.scheduler.Scheduler` claims the ticks in Redis.
Validation that needs the job registry (does the job exist, do its arguments
fit) is in :mod:`django_rqueue.checks`.
"""

from __future__ import annotations

import datetime
import enum
import re
import zoneinfo
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from cronsim import CronSim, CronSimError
from django.conf import settings
from django.core import checks
from django.core.checks import CheckMessage

#: Keys an entry may have.
ENTRY_KEYS = frozenset(
    {"job", "cron", "every", "args", "kwargs", "timezone", "queue", "priority", "group"}
)
#: Entry names: they are part of Redis keys (no braces: the Cluster hash tag).
ENTRY_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,99}$")
#: Cron ticks found per :meth:`ScheduleEntry.next_tick_ms` before giving up on one
#: strictly after the given instant (only an ambiguous autumn hour needs more than one).
_CRON_STEPS = 4


class Trigger(enum.StrEnum):
    """How an entry's ticks are defined."""

    CRON = "cron"
    EVERY = "every"


@dataclass(frozen=True)
class ScheduleEntry:
    """One validated entry of ``RQUEUE["SCHEDULE"]``."""

    name: str
    #: The registered name of the job it enqueues.
    job: str
    trigger: Trigger
    #: The 5-field cron expression (``trigger`` CRON), or ``""``.
    cron: str
    #: The period in seconds (``trigger`` EVERY), or ``0``.
    every: int
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    #: IANA time zone name, or ``None`` for the project's ``TIME_ZONE`` (read when used).
    timezone: str | None = None
    #: Overrides of the job's own options (``None``: the job's).
    queue: str | None = None
    priority: int | None = None
    group: str | None = None

    @property
    def zone(self) -> zoneinfo.ZoneInfo:
        """The entry's time zone (the project's ``TIME_ZONE`` unless the entry names one)."""
        return zoneinfo.ZoneInfo(self.timezone or settings.TIME_ZONE or "UTC")

    @property
    def expression(self) -> str:
        """How the admin and ``rqueue_info`` show when it runs: ``"30 2 * * * (Europe/Paris)"``
        or ``"every 60 s"``."""
        if self.trigger is Trigger.EVERY:
            return f"every {self.every} s"
        return f"{self.cron} ({self.zone.key})"

    @property
    def spec(self) -> str:
        """What defines the ticks; a change of it re-computes the stored next tick."""
        if self.trigger is Trigger.EVERY:
            return f"every:{self.every}"
        return f"cron:{self.cron}@{self.zone.key}"

    def next_tick_ms(self, after_ms: int) -> int | None:
        """The first tick strictly after ``after_ms`` (ms since the epoch, UTC), in ms.

        ``None`` when a cron expression has no match within cronsim's horizon
        (50 years). ``every`` ticks: ``(after_ms // period + 1) * period``
        with the period in ms, so they are aligned to the Unix epoch.
        """
        if self.trigger is Trigger.EVERY:
            period = self.every * 1000
            return (after_ms // period + 1) * period
        after = datetime.datetime.fromtimestamp(after_ms / 1000, self.zone)
        ticks = CronSim(self.cron, after)
        # cronsim reads the wall time of `after` and ignores its fold, so in a
        # repeated autumn hour it may answer a tick earlier than `after`.
        for _ in range(_CRON_STEPS):
            try:
                tick = int(next(ticks).timestamp() * 1000)
            except StopIteration:
                return None
            if tick > after_ms:
                return tick
        return None


def parse(raw: Mapping[str, Any]) -> dict[str, ScheduleEntry]:
    """Return the entries of a valid ``RQUEUE["SCHEDULE"]`` (check it with :func:`problems`)."""
    entries: dict[str, ScheduleEntry] = {}
    for name, options in raw.items():
        cron, every = options.get("cron"), options.get("every")
        entries[name] = ScheduleEntry(
            name=name,
            job=options["job"],
            trigger=Trigger.CRON if cron is not None else Trigger.EVERY,
            cron=" ".join(cron.split()) if cron is not None else "",
            every=every if every is not None else 0,
            args=tuple(options.get("args", ())),
            kwargs=dict(options.get("kwargs", {})),
            timezone=options.get("timezone"),
            queue=options.get("queue"),
            priority=options.get("priority"),
            group=options.get("group"),
        )
    return entries


def problems(raw: object, declared_queues: Collection[str]) -> list[CheckMessage]:
    """Every problem of a raw ``RQUEUE["SCHEDULE"]`` that needs no job registry.

    Ids: E020 not a dict of entries (bad entry name, entry not a dict, unknown
    key, ``job`` not a name); E021 both or neither of ``cron``/``every``, a cron
    expression that is not 5 valid fields or never matches, ``every`` not an
    integer >= 1; E022 unknown time zone; E024 ``args`` not a list or
    ``kwargs`` not a dict with str keys; E025 ``queue`` undeclared,
    ``priority`` not an integer in -100..100, ``group`` not a str of at most
    200 characters. ``declared_queues``: the names of the declared queues.
    E023 (unknown job) and whether the arguments fit the job are checked by
    :func:`django_rqueue.checks.check_schedule`.
    """
    if not isinstance(raw, Mapping):
        return [
            checks.Error(
                "RQUEUE['SCHEDULE'] must be a dict of entry name -> entry.", id="rqueue.E020"
            )
        ]
    found: list[CheckMessage] = []
    for name, entry in raw.items():
        where = f"RQUEUE['SCHEDULE'][{name!r}]"
        if not isinstance(name, str) or not ENTRY_NAME_RE.match(name):
            found.append(
                checks.Error(
                    f"Schedule entry name {name!r} is invalid.",
                    hint="Use 1-100 characters of letters, digits, '_', '.', ':', '@', '-'.",
                    id="rqueue.E020",
                )
            )
        if not isinstance(entry, Mapping):
            found.append(checks.Error(f"{where} must be a dict.", id="rqueue.E020"))
            continue
        found += _entry_problems(where, entry, declared_queues)
    return found


def _entry_problems(
    where: str, entry: Mapping[str, Any], declared_queues: Collection[str]
) -> list[CheckMessage]:
    found: list[CheckMessage] = [
        checks.Error(
            f"{where} has an unknown key {key!r}.",
            hint=f"Allowed keys: {', '.join(sorted(ENTRY_KEYS))}.",
            id="rqueue.E020",
        )
        for key in entry
        if key not in ENTRY_KEYS
    ]
    if not isinstance(entry.get("job"), str) or not entry["job"]:
        found.append(
            checks.Error(f"{where}['job'] must be the name of a registered @job.", id="rqueue.E020")
        )
    found += _trigger_problems(where, entry)
    tz = entry.get("timezone")
    if tz is not None and not _known_zone(tz):
        found.append(
            checks.Error(
                f"{where}['timezone'] {tz!r} is not a known IANA time zone.",
                hint="For example 'Europe/Paris' or 'UTC' (see zoneinfo.available_timezones()).",
                id="rqueue.E022",
            )
        )
    args, kwargs = entry.get("args", []), entry.get("kwargs", {})
    if not isinstance(args, list | tuple):
        found.append(checks.Error(f"{where}['args'] must be a list.", id="rqueue.E024"))
    if not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs):
        found.append(
            checks.Error(f"{where}['kwargs'] must be a dict with str keys.", id="rqueue.E024")
        )
    found += _option_problems(where, entry, declared_queues)
    return found


def _trigger_problems(where: str, entry: Mapping[str, Any]) -> list[CheckMessage]:
    cron, every = entry.get("cron"), entry.get("every")
    if (cron is None) == (every is None):
        return [
            checks.Error(
                f"{where} must set exactly one of 'cron' and 'every'.",
                hint="'cron': a 5-field cron expression; 'every': a period in seconds.",
                id="rqueue.E021",
            )
        ]
    if every is not None:
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            return [
                checks.Error(
                    f"{where}['every'] must be an integer >= 1 (seconds), got {every!r}.",
                    id="rqueue.E021",
                )
            ]
        return []
    if not isinstance(cron, str) or len(cron.split()) != 5:
        return [
            checks.Error(
                f"{where}['cron'] must be a 5-field cron expression, got {cron!r}.",
                hint="minute hour day-of-month month day-of-week, e.g. '30 2 * * *'.",
                id="rqueue.E021",
            )
        ]
    try:
        next(CronSim(cron, datetime.datetime.now(datetime.UTC)))
    except CronSimError as exc:
        return [checks.Error(f"{where}['cron'] {cron!r} is invalid: {exc}.", id="rqueue.E021")]
    except StopIteration:
        return [
            checks.Error(
                f"{where}['cron'] {cron!r} matches no time in the next 50 years.",
                id="rqueue.E021",
            )
        ]
    return []


def _option_problems(
    where: str, entry: Mapping[str, Any], declared_queues: Collection[str]
) -> list[CheckMessage]:
    found: list[CheckMessage] = []
    queue = entry.get("queue")
    if queue is not None and queue not in declared_queues:
        found.append(
            checks.Error(
                f"{where}['queue'] {queue!r} is not declared in RQUEUE['QUEUES'].",
                id="rqueue.E025",
            )
        )
    priority = entry.get("priority")
    if priority is not None and (
        isinstance(priority, bool) or not isinstance(priority, int) or not -100 <= priority <= 100
    ):
        found.append(
            checks.Error(
                f"{where}['priority'] must be an integer from -100 to 100, got {priority!r}.",
                id="rqueue.E025",
            )
        )
    group = entry.get("group")
    if group is not None and (not isinstance(group, str) or len(group) > 200):
        found.append(
            checks.Error(
                f"{where}['group'] must be a str of at most 200 characters.", id="rqueue.E025"
            )
        )
    return found


def _known_zone(name: object) -> bool:
    if not isinstance(name, str) or not name:
        return False
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return False
    return True
