"""Periodic entries as Sentry cron monitors (django_rqueue.contrib.sentry.crons): the
monitor slug and configuration of an entry, and the check-ins of a run in this process
(``in_progress`` at enqueue, ``ok``/``error`` when the run ends, none while it retries)."""

from __future__ import annotations

from typing import Any

import pytest
from pytest_django.fixtures import Settings as SettingsFixture

from django_rqueue.contrib.sentry.crons import CHECK_IN_HEADER, monitor_config, monitor_slug
from django_rqueue.periodic import runtime
from django_rqueue.periodic.entries import parse
from tests.jobs_app.jobs import fail_then_succeed, record, rejects
from tests.support.inprocess import poller_thread, run_worker

from .conftest import Start
from .recording import items

#: The in-process worker closes old database connections around each job, as real ones do.
pytestmark = pytest.mark.usefixtures("worker_may_close_db_connections")


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("nightly-digest", "nightly-digest"),
        ("Nightly.Digest@eu:1", "nightly-digest-eu-1"),
        ("x" * 100, "x" * 50),
    ],
)
def test_the_slug_is_made_from_the_entry_name(name: str, slug: str) -> None:
    assert monitor_slug(name) == slug


@pytest.mark.parametrize(
    ("entry", "config"),
    [
        ({"every": 60}, {"schedule": {"type": "interval", "value": 1, "unit": "minute"}}),
        ({"every": 5400}, {"schedule": {"type": "interval", "value": 90, "unit": "minute"}}),
        ({"every": 7200}, {"schedule": {"type": "interval", "value": 2, "unit": "hour"}}),
        ({"every": 1209600}, {"schedule": {"type": "interval", "value": 2, "unit": "week"}}),
        ({"every": 90}, None),
        (
            {"cron": "30  2 * * 1-5", "timezone": "Europe/Paris"},
            {
                "schedule": {"type": "crontab", "value": "30 2 * * 1-5"},
                "timezone": "Europe/Paris",
            },
        ),
        ({"cron": "*/5 * * * *"}, {"schedule": {"type": "crontab", "value": "*/5 * * * *"}}),
        ({"cron": "0 0 L * *"}, None),
    ],
)
def test_the_monitor_config_follows_the_schedule(
    entry: dict[str, Any], config: dict[str, Any] | None
) -> None:
    [parsed] = parse({"e": {"job": record.name, **entry}}).values()
    if config is not None and config["schedule"]["type"] == "crontab":
        config.setdefault("timezone", "UTC")  # the project's TIME_ZONE
    assert monitor_config(parsed) == config


def _schedule(settings: SettingsFixture, **entries: dict[str, Any]) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "SCHEDULE": entries}


def _check_ins(envelopes: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [
        (c["monitor_slug"], c["status"], c["check_in_id"]) for c in items(envelopes, "check_in")
    ]


@pytest.mark.usefixtures("worker_may_close_db_connections")
def test_a_run_is_an_in_progress_then_an_ok_check_in(
    sentry: Start, settings: SettingsFixture, ledger: str
) -> None:
    envelopes = sentry(monitor_periodic=True)
    _schedule(settings, **{"Ping.Every": {"job": record.name, "every": 120, "args": [ledger, "p"]}})
    job = runtime.run_now("Ping.Every")
    [opened] = items(envelopes, "check_in")
    assert opened["monitor_slug"] == "ping-every" and opened["status"] == "in_progress"
    assert opened["monitor_config"] == {
        "schedule": {"type": "interval", "value": 2, "unit": "minute"}
    }
    assert job.headers[CHECK_IN_HEADER] == opened["check_in_id"]
    assert "sentry-trace" not in job.headers  # each tick starts its own trace
    run_worker(burst=True)
    check_ins = items(envelopes, "check_in")
    assert _check_ins(envelopes) == [
        ("ping-every", "in_progress", opened["check_in_id"]),
        ("ping-every", "ok", opened["check_in_id"]),
    ]
    assert 0 <= check_ins[1]["duration"] < 30


@pytest.mark.usefixtures("worker_may_close_db_connections")
def test_a_failed_run_is_an_error_check_in_only_once_it_is_final(
    sentry: Start, settings: SettingsFixture, ledger: str
) -> None:
    envelopes = sentry(monitor_periodic=True, monitor_config=False)
    _schedule(
        settings,
        flaky={"job": fail_then_succeed.name, "every": 60, "args": [ledger, "f", 1]},
        rejected={"job": rejects.name, "every": 60, "args": [ledger, "r"]},
    )
    for name in ("flaky", "rejected"):
        runtime.pause(name)  # no tick of the poller's own while the retry waits for it
        runtime.run_now(name)
    assert all("monitor_config" not in c for c in items(envelopes, "check_in"))
    with poller_thread():
        run_worker(max_jobs=3)
    statuses = [(slug, status) for slug, status, _ in _check_ins(envelopes)]
    assert statuses == [
        ("flaky", "in_progress"),
        ("rejected", "in_progress"),
        ("rejected", "error"),
        ("flaky", "ok"),
    ], statuses


def test_no_check_in_without_monitor_periodic_or_for_an_excluded_entry(
    sentry: Start, settings: SettingsFixture, ledger: str
) -> None:
    entry = {"job": record.name, "every": 60, "args": [ledger, "p"]}
    _schedule(settings, ping=entry, nightly=entry)
    envelopes = sentry()
    assert runtime.run_now("ping").headers == {}
    envelopes = sentry(monitor_periodic=True, exclude_periodic=["night.*"])
    runtime.run_now("nightly")
    runtime.run_now("ping")
    assert [slug for slug, _, _ in _check_ins(envelopes)] == ["ping"]
