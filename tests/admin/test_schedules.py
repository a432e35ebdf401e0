"""The periodic jobs page (django_rqueue.admin.schedules): listing, run now, pause, resume."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from django.contrib.admin.models import CHANGE, LogEntry
from django.test import Client
from pytest_django.fixtures import Settings as SettingsFixture

from django_rqueue import get_job
from django_rqueue.engine.keys import QueueKeys
from django_rqueue.worker.scheduler import Scheduler

from .conftest import BASE, MakeClient
from .test_actions import messages_of
from .test_pages import job_url

PAGE = f"{BASE}schedules/"
KEYS = QueueKeys.of("rqueue", "default")


@pytest.fixture
def schedule(settings: SettingsFixture, ledger: str) -> dict[str, Any]:
    entries = {
        "digest": {
            "job": "tests.jobs_app.jobs.record",
            "cron": "30 2 * * *",
            "args": [ledger, "d"],
        },
        "ping": {"job": "tests.jobs_app.jobs.record", "every": 60, "args": [ledger, "p"]},
        "ghost": {"job": "no.such.job", "every": 60},
    }
    settings.RQUEUE = {**settings.RQUEUE, "SCHEDULE": entries}
    return entries


def action_url(entry: str, action: str) -> str:
    return f"{PAGE}{entry}/{action}/"


def test_the_page_lists_every_entry_with_its_next_and_last_run(
    admin_client_rq: Client, schedule: dict[str, Any], rqueue_redis: redis.Redis
):
    Scheduler(["default"]).run_once()  # a poller stored the next ticks
    admin_client_rq.post(action_url("ping", "run_now"))
    response = admin_client_rq.get(PAGE)
    assert response.status_code == 200
    rows = {row["state"].name: row for row in response.context["rows"]}
    assert list(rows) == ["digest", "ghost", "ping"]
    ping = rows["ping"]["state"]
    assert ping.entry.expression == "every 60 s"
    assert ping.next_run is not None and ping.last_run is not None
    assert not ping.paused
    assert rows["ping"]["last_job_url"] == job_url(ping.last_job_id)
    assert rows["ghost"]["state"].error
    content = response.content.decode()
    assert "30 2 * * * (UTC)" in content
    assert ping.last_job_id in content
    assert "no @job named &#x27;no.such.job&#x27;" in content


def test_the_overview_links_to_the_page(admin_client_rq: Client, schedule: dict[str, Any]):
    response = admin_client_rq.get(BASE)
    assert f'href="{PAGE}"' in response.content.decode()
    assert "3 periodic jobs" in response.content.decode()


def test_run_now_is_confirmed_on_get_and_enqueues_on_post(
    admin_client_rq: Client, schedule: dict[str, Any], ledger: str
):
    confirm = admin_client_rq.get(action_url("ping", "run_now"))
    assert confirm.status_code == 200
    assert confirm.templates[0].name == "admin/django_rqueue/confirm.html"
    done = admin_client_rq.post(action_url("ping", "run_now"))
    assert done.status_code == 302 and done["Location"] == PAGE
    (text,) = messages_of(done)
    job_id = text.split("job ")[1].rstrip(".")
    job = get_job(job_id)
    assert job is not None and job.args == [ledger, "p"]
    log = LogEntry.objects.get(object_id="schedule:ping")
    assert log.action_flag == CHANGE
    assert job_id in log.change_message


def test_pause_and_resume(
    admin_client_rq: Client, schedule: dict[str, Any], rqueue_redis: redis.Redis
):
    admin_client_rq.post(action_url("digest", "pause"))
    assert rqueue_redis.hget(KEYS.schedule_entry("digest"), "paused") == b"1"
    page = admin_client_rq.get(PAGE)
    row = next(r for r in page.context["rows"] if r["state"].name == "digest")
    assert row["state"].paused
    assert [a for a, _label, _url in row["actions"]] == ["run_now", "resume"]
    admin_client_rq.post(action_url("digest", "resume"))
    assert rqueue_redis.hget(KEYS.schedule_entry("digest"), "paused") is None
    assert LogEntry.objects.filter(object_id="schedule:digest").count() == 2


def test_the_actions_need_the_change_permission(
    make_client: MakeClient, schedule: dict[str, Any], rqueue_redis: redis.Redis
):
    viewer = make_client("view_job")
    assert viewer.get(PAGE).status_code == 200
    assert 'class="rq-actions"' not in viewer.get(PAGE).content.decode()
    for action in ("run_now", "pause", "resume"):
        assert viewer.get(action_url("ping", action)).status_code == 403
        assert viewer.post(action_url("ping", action)).status_code == 403
    assert not rqueue_redis.exists(KEYS.schedule_entry("ping"))
    assert make_client("change_job").post(action_url("ping", "pause")).status_code == 302


def test_unknown_entries_and_actions_are_404(admin_client_rq: Client, schedule: dict[str, Any]):
    assert admin_client_rq.get(action_url("nope", "pause")).status_code == 404
    assert admin_client_rq.get(action_url("ping", "explode")).status_code == 404


def test_an_entry_whose_job_is_unknown_reports_the_error(
    admin_client_rq: Client, schedule: dict[str, Any]
):
    response = admin_client_rq.post(action_url("ghost", "run_now"), follow=True)
    assert any("no @job named" in m for m in messages_of(response))


def test_an_empty_schedule(admin_client_rq: Client):
    response = admin_client_rq.get(PAGE)
    assert response.status_code == 200
    assert "No periodic jobs" in response.content.decode()
