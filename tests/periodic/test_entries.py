"""RQUEUE["SCHEDULE"] entries (django_rqueue.periodic.entries): validation and tick computation.

Ticks are computed from explicit instants (``next_tick_ms(after_ms)``), so the
DST cases below need no clock: the real-process tests of exactly-once claims
are in tests/faults/test_schedule.py.
"""

from __future__ import annotations

import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.test import override_settings

from django_rqueue.periodic.entries import ScheduleEntry, Trigger, parse, problems

QUEUES = {"default", "emails"}
BERLIN = ZoneInfo("Europe/Berlin")


def _entry(**options: Any) -> ScheduleEntry:
    return parse({"e": {"job": "tests.jobs_app.jobs.record", **options}})["e"]


def _ms(dt: datetime.datetime) -> int:
    return int(dt.timestamp() * 1000)


def _local(ms: int, zone: ZoneInfo = BERLIN) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, zone)


def _ticks(entry: ScheduleEntry, start: datetime.datetime, count: int) -> list[int]:
    ticks, at = [], _ms(start)
    for _ in range(count):
        tick = entry.next_tick_ms(at)
        assert tick is not None
        ticks.append(tick)
        at = tick
    return ticks


def test_every_ticks_are_multiples_of_the_period_since_the_epoch():
    entry = _entry(every=60)
    assert entry.trigger is Trigger.EVERY
    assert entry.next_tick_ms(0) == 60_000
    assert entry.next_tick_ms(59_999) == 60_000
    assert entry.next_tick_ms(60_000) == 120_000  # strictly after
    assert entry.next_tick_ms(1_700_000_012_345) == 1_700_000_040_000


def test_every_ignores_the_time_zone():
    assert _entry(every=3600, timezone="Asia/Kolkata").next_tick_ms(0) == 3_600_000


def test_cron_ticks_follow_the_expression_in_utc():
    entry = _entry(cron="*/15  9 * * 1-5", timezone="UTC")  # extra blanks are normalised
    assert entry.cron == "*/15 9 * * 1-5"
    monday = datetime.datetime(2026, 11, 23, 8, 59, 30, tzinfo=datetime.UTC)
    got = [_local(t, ZoneInfo("UTC")).strftime("%a %H:%M") for t in _ticks(entry, monday, 5)]
    assert got == ["Mon 09:00", "Mon 09:15", "Mon 09:30", "Mon 09:45", "Tue 09:00"]


def test_a_cron_entry_defaults_to_the_projects_time_zone():
    entry = _entry(cron="0 12 * * *")
    with override_settings(TIME_ZONE="America/New_York"):
        assert entry.zone.key == "America/New_York"
        tick = entry.next_tick_ms(_ms(datetime.datetime(2026, 7, 1, tzinfo=datetime.UTC)))
        assert tick is not None
        assert _local(tick, ZoneInfo("UTC")).hour == 16  # noon EDT
        assert entry.spec == "cron:0 12 * * *@America/New_York"


def test_a_daily_cron_entry_keeps_its_local_time_across_both_dst_changes():
    entry = _entry(cron="0 9 * * *", timezone="Europe/Berlin")
    got = [_local(t) for t in _ticks(entry, datetime.datetime(2026, 3, 28, 10, tzinfo=BERLIN), 3)]
    assert [(d.day, d.hour, d.utcoffset()) for d in got] == [
        (29, 9, datetime.timedelta(hours=2)),  # the day summer time starts
        (30, 9, datetime.timedelta(hours=2)),
        (31, 9, datetime.timedelta(hours=2)),
    ]
    got = [_local(t) for t in _ticks(entry, datetime.datetime(2026, 10, 24, 10, tzinfo=BERLIN), 2)]
    assert [(d.day, d.hour, d.utcoffset()) for d in got] == [
        (25, 9, datetime.timedelta(hours=1)),
        (26, 9, datetime.timedelta(hours=1)),
    ]
    # 24 h between the two ticks around the change would be wrong: it is 23 h.
    first, second = _ticks(entry, datetime.datetime(2026, 3, 28, 10, tzinfo=BERLIN), 2)
    assert second - first == 24 * 3_600_000
    before = _ms(datetime.datetime(2026, 3, 28, 9, tzinfo=BERLIN))
    assert first - before == 23 * 3_600_000


def test_a_daily_time_skipped_in_spring_runs_once_right_after_the_gap():
    # 02:30 does not exist in Berlin on 29 March 2026 (02:00 -> 03:00): Debian cron's rule.
    entry = _entry(cron="30 2 * * *", timezone="Europe/Berlin")
    got = [_local(t) for t in _ticks(entry, datetime.datetime(2026, 3, 28, 3, tzinfo=BERLIN), 3)]
    assert [(d.day, d.hour, d.minute) for d in got] == [(29, 3, 0), (30, 2, 30), (31, 2, 30)]


def test_a_daily_time_repeated_in_autumn_runs_once():
    # 02:30 happens twice in Berlin on 25 October 2026 (03:00 -> 02:00).
    entry = _entry(cron="30 2 * * *", timezone="Europe/Berlin")
    ticks = _ticks(entry, datetime.datetime(2026, 10, 24, 3, tzinfo=BERLIN), 3)
    assert [(_local(t).day, _local(t).hour, _local(t).minute) for t in ticks] == [
        (25, 2, 30),
        (26, 2, 30),
        (27, 2, 30),
    ]
    assert ticks[1] - ticks[0] == 25 * 3_600_000


def test_a_sub_hourly_cron_entry_runs_through_the_repeated_hour_in_real_time_order():
    entry = _entry(cron="*/30 * * * *", timezone="Europe/Berlin")
    start = datetime.datetime(2026, 10, 25, 1, 50, tzinfo=BERLIN)
    ticks = _ticks(entry, start, 6)
    assert ticks == sorted(set(ticks))  # strictly increasing: no tick twice
    assert [t - ticks[0] for t in ticks] == [i * 1_800_000 for i in range(6)]
    assert [_local(t).strftime("%H:%M%z") for t in ticks] == [
        "02:00+0200",
        "02:30+0200",
        "02:00+0100",
        "02:30+0100",
        "03:00+0100",
        "03:30+0100",
    ]


def test_the_next_tick_from_inside_the_repeated_hour_is_never_earlier():
    # An instant in the second 02:10 (fold=1): the next "*/30" tick is the second 02:30.
    entry = _entry(cron="*/30 * * * *", timezone="Europe/Berlin")
    second_0210 = _ms(datetime.datetime(2026, 10, 25, 2, 10, tzinfo=BERLIN, fold=1))
    tick = entry.next_tick_ms(second_0210)
    assert tick == second_0210 + 20 * 60_000


def test_an_expression_that_never_matches_has_no_next_tick():
    # cronsim gives up after 50 years: the 1st or 21st of a month that is also its last
    # Monday never comes (cronsim's own example).
    entry = ScheduleEntry(name="e", job="j", trigger=Trigger.CRON, cron="* * */20 * 1L", every=0)
    assert entry.next_tick_ms(0) is None


def test_expression_and_spec_describe_the_trigger():
    assert _entry(every=5).expression == "every 5 s"
    assert _entry(every=5).spec == "every:5"
    cron = _entry(cron="0 1 * * *", timezone="Europe/Berlin")
    assert cron.expression == "0 1 * * * (Europe/Berlin)"
    assert cron.spec == "cron:0 1 * * *@Europe/Berlin"


def test_parse_keeps_arguments_and_overrides():
    entry = _entry(every=5, args=[1, "a"], kwargs={"k": 2}, queue="emails", priority=5, group="g")
    assert (entry.args, dict(entry.kwargs)) == ((1, "a"), {"k": 2})
    assert (entry.queue, entry.priority, entry.group) == ("emails", 5, "g")
    bare = _entry(every=5)
    assert (bare.args, dict(bare.kwargs), bare.queue, bare.priority, bare.group) == (
        (),
        {},
        None,
        None,
        None,
    )


def _problem_ids(schedule: object) -> list[str]:
    return sorted({p.id for p in problems(schedule, QUEUES) if p.id})


def test_a_valid_schedule_has_no_problem():
    assert (
        _problem_ids(
            {
                "nightly": {"job": "a.b", "cron": "30 2 * * *", "timezone": "Europe/Paris"},
                "often": {"job": "a.c", "every": 1, "args": [1], "kwargs": {"x": 1}},
                "full:1@x": {
                    "job": "a.d",
                    "every": 60,
                    "queue": "emails",
                    "priority": -100,
                    "group": "tenant:1",
                },
            }
        )
        == []
    )


@pytest.mark.parametrize(
    ("schedule", "expected"),
    [
        ([], "rqueue.E020"),
        ({"e": "every minute"}, "rqueue.E020"),
        ({"bad name": {"job": "a", "every": 1}}, "rqueue.E020"),
        ({"{tag}": {"job": "a", "every": 1}}, "rqueue.E020"),
        ({"e": {"job": "a", "every": 1, "cronn": "* * * * *"}}, "rqueue.E020"),
        ({"e": {"every": 1}}, "rqueue.E020"),
        ({"e": {"job": 3, "every": 1}}, "rqueue.E020"),
        ({"e": {"job": "a"}}, "rqueue.E021"),
        ({"e": {"job": "a", "every": 1, "cron": "* * * * *"}}, "rqueue.E021"),
        ({"e": {"job": "a", "every": 0}}, "rqueue.E021"),
        ({"e": {"job": "a", "every": 1.5}}, "rqueue.E021"),
        ({"e": {"job": "a", "every": True}}, "rqueue.E021"),
        ({"e": {"job": "a", "cron": "* * * *"}}, "rqueue.E021"),
        ({"e": {"job": "a", "cron": "0 * * * * *"}}, "rqueue.E021"),
        ({"e": {"job": "a", "cron": "@daily"}}, "rqueue.E021"),
        ({"e": {"job": "a", "cron": "61 * * * *"}}, "rqueue.E021"),
        ({"e": {"job": "a", "cron": "0 0 31 2 *"}}, "rqueue.E021"),
        ({"e": {"job": "a", "cron": 5}}, "rqueue.E021"),
        ({"e": {"job": "a", "every": 1, "timezone": "Mars/Olympus"}}, "rqueue.E022"),
        ({"e": {"job": "a", "every": 1, "timezone": ""}}, "rqueue.E022"),
        ({"e": {"job": "a", "every": 1, "timezone": "../etc/passwd"}}, "rqueue.E022"),
        ({"e": {"job": "a", "every": 1, "args": "x"}}, "rqueue.E024"),
        ({"e": {"job": "a", "every": 1, "args": {"x": 1}}}, "rqueue.E024"),
        ({"e": {"job": "a", "every": 1, "kwargs": [1]}}, "rqueue.E024"),
        ({"e": {"job": "a", "every": 1, "kwargs": {1: 2}}}, "rqueue.E024"),
        ({"e": {"job": "a", "every": 1, "queue": "nowhere"}}, "rqueue.E025"),
        ({"e": {"job": "a", "every": 1, "priority": 101}}, "rqueue.E025"),
        ({"e": {"job": "a", "every": 1, "priority": "high"}}, "rqueue.E025"),
        ({"e": {"job": "a", "every": 1, "group": 7}}, "rqueue.E025"),
    ],
)
def test_each_mistake_has_its_id(schedule: object, expected: str):
    assert _problem_ids(schedule) == [expected]
