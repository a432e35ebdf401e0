"""Actions: confirmation on GET, POST + CSRF, permissions, history, races."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.contrib.messages import get_messages
from django.test import Client

from django_rqueue.ops.counts import queue_counts
from tests.support.jobs_in_state import Jobs

from .conftest import BASE, MakeClient
from .test_pages import job_url


def messages_of(response: Any) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


@pytest.mark.parametrize(
    ("make", "action", "after"),
    [
        ("failed", "retry", "queued"),
        ("scheduled", "run_now", "queued"),
        ("queued", "cancel", "cancelled"),
        ("failed", "delete", None),
        ("succeeded", "delete", None),
    ],
)
def test_an_action_is_confirmed_on_get_and_done_on_post(
    admin_client_rq: Client, jobs: Jobs, make: str, action: str, after: str | None
):
    job_id = getattr(jobs, make)()
    confirm = admin_client_rq.get(job_url(job_id, action))
    assert confirm.status_code == 200
    assert confirm.templates[0].name == "admin/django_rqueue/confirm.html"
    assert b'method="post"' in confirm.content
    assert jobs.state(job_id) == make  # GET changed nothing
    done = admin_client_rq.post(job_url(job_id, action))
    assert done.status_code == 302
    assert jobs.state(job_id) == after
    assert any(job_id in m for m in messages_of(done))
    entry = LogEntry.objects.get(object_id=job_id)
    assert entry.action_flag == (DELETION if action == "delete" else CHANGE)


def test_a_job_that_changed_state_meanwhile_is_reported_not_clobbered(
    admin_client_rq: Client, jobs: Jobs
):
    job_id = jobs.failed()
    admin_client_rq.get(job_url(job_id, "retry"))  # the confirmation page was shown...
    jobs.client.hset(jobs.keys().job(job_id), "s", "running")  # ...then a worker took it
    jobs.client.zrem(jobs.keys().failed, job_id)
    response = admin_client_rq.post(job_url(job_id, "retry"))
    assert response.status_code == 302
    assert jobs.state(job_id) == "running"
    assert any("changed meanwhile" in m for m in messages_of(response))
    assert not LogEntry.objects.exists()


def test_a_running_job_cannot_be_deleted(admin_client_rq: Client, jobs: Jobs):
    job_id = jobs.running()
    response = admin_client_rq.post(job_url(job_id, "delete"))
    assert jobs.state(job_id) == "running"
    assert any("running" in m for m in messages_of(response))


def test_cancelling_a_running_job_asks_its_worker_and_logs_it(admin_client_rq: Client, jobs: Jobs):
    job_id = jobs.running()
    page = admin_client_rq.get(job_url(job_id))
    assert job_url(job_id, "cancel").encode() in page.content  # the button is offered
    response = admin_client_rq.post(job_url(job_id, "cancel"))
    assert response.status_code == 302 and response["Location"] == job_url(job_id)
    assert jobs.state(job_id) == "running"  # until its worker stopped it
    assert jobs.client.hget(jobs.keys().job(job_id), "cx") is not None
    assert any("asked to stop" in m for m in messages_of(response))
    entry = LogEntry.objects.get(object_id=job_id)
    assert entry.action_flag == CHANGE and "cancel requested while running" in entry.change_message


def test_csrf_is_enforced_on_actions(make_client: MakeClient, jobs: Jobs):
    client = make_client(superuser=True, csrf=True)
    job_id = jobs.failed()
    assert client.post(job_url(job_id, "retry")).status_code == 403
    assert jobs.state(job_id) == "failed"
    page = client.get(job_url(job_id, "retry"))
    token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page.content)
    assert token is not None
    response = client.post(job_url(job_id, "retry"), {"csrfmiddlewaretoken": token[1].decode()})
    assert response.status_code == 302
    assert jobs.state(job_id) == "queued"


@pytest.mark.parametrize(
    ("perms", "action", "allowed"),
    [
        (["view_job"], "retry", False),
        (["view_job"], "delete", False),
        (["view_job", "change_job"], "retry", True),
        (["view_job", "change_job"], "delete", False),
        (["view_job", "change_job"], "cancel", False),
        (["view_job", "delete_job"], "delete", True),
        (["view_job", "delete_job"], "retry", False),
    ],
)
def test_action_permissions(
    make_client: MakeClient, jobs: Jobs, perms: list[str], action: str, allowed: bool
):
    client = make_client(*perms)
    job_id = jobs.failed()
    get = client.get(job_url(job_id, action))
    post = client.post(job_url(job_id, action))
    if allowed:
        assert (get.status_code, post.status_code) == (200, 302)
        assert jobs.state(job_id) != "failed"
    else:
        assert (get.status_code, post.status_code) == (403, 403)
        assert jobs.state(job_id) == "failed"


def test_buttons_follow_permissions(make_client: MakeClient, jobs: Jobs):
    job_id = jobs.failed()
    client = make_client("view_job", "change_job")
    detail = client.get(job_url(job_id))
    assert [a[0] for a in detail.context["actions"]] == ["retry"]
    listing = client.get(f"{BASE}queues/default/failed/")
    assert [a for a, _ in listing.context["bulk_actions"]] == ["retry"]
    assert b"Retry all failed" in listing.content
    assert b"Delete all failed" not in listing.content


def test_bulk_selection_confirms_then_acts_and_reports_refusals(
    admin_client_rq: Client, jobs: Jobs
):
    ids = [jobs.failed() for _ in range(3)]
    other_queue = jobs.failed(queue="emails")
    url = f"{BASE}queues/default/selected/"
    form = {"action": "retry", "ids": [*ids, other_queue], "next": f"{BASE}queues/default/failed/"}
    confirm = admin_client_rq.post(url, form)
    assert confirm.status_code == 200
    assert confirm.templates[0].name == "admin/django_rqueue/confirm.html"
    assert {jobs.state(i) for i in ids} == {"failed"}
    jobs.client.hset(jobs.keys().job(ids[0]), "s", "running")  # changed meanwhile
    jobs.client.zrem(jobs.keys().failed, ids[0])
    done = admin_client_rq.post(url, {**form, "confirm": "yes"})
    assert done.status_code == 302 and done["Location"] == f"{BASE}queues/default/failed/"
    assert [jobs.state(i) for i in ids] == ["running", "queued", "queued"]
    assert jobs.state(other_queue, "emails") == "failed"  # not of this queue: ignored
    text = messages_of(done)
    assert any("2 jobs retried" in m for m in text)
    assert any(ids[0] in m and "running" in m for m in text)
    assert LogEntry.objects.count() == 2


def test_bulk_needs_post_and_permission(make_client: MakeClient, jobs: Jobs):
    viewer = make_client("view_job")
    job_id = jobs.failed()
    url = f"{BASE}queues/default/selected/"
    assert viewer.get(url).status_code == 405
    form = {"action": "delete", "ids": [job_id], "confirm": "yes"}
    assert viewer.post(url, form).status_code == 403
    assert jobs.state(job_id) == "failed"


def test_retry_all_failed_with_a_name_filter(admin_client_rq: Client, jobs: Jobs):
    a = [jobs.failed(name="a") for _ in range(3)]
    b = [jobs.failed(name="b") for _ in range(2)]
    url = f"{BASE}queues/default/failed/retry-all/"
    confirm = admin_client_rq.get(url, {"name": "a"})
    assert confirm.status_code == 200
    assert b"named a" in confirm.content
    assert {jobs.state(i) for i in a} == {"failed"}
    done = admin_client_rq.post(url, {"name": "a"})
    assert done.status_code == 302
    assert {jobs.state(i) for i in a} == {"queued"}
    assert {jobs.state(i) for i in b} == {"failed"}
    assert any("3 failed jobs" in m for m in messages_of(done))
    assert LogEntry.objects.get().object_id == "default:failed"


def test_delete_all_failed_needs_delete_permission(make_client: MakeClient, jobs: Jobs):
    job_id = jobs.failed()
    client = make_client("view_job", "change_job")
    assert client.post(f"{BASE}queues/default/failed/delete-all/").status_code == 403
    assert jobs.state(job_id) == "failed"
    deleter = make_client("view_job", "delete_job")
    assert deleter.post(f"{BASE}queues/default/failed/delete-all/").status_code == 302
    assert jobs.state(job_id) is None


def test_next_must_stay_on_this_site(admin_client_rq: Client, jobs: Jobs):
    job_id = jobs.failed()
    response = admin_client_rq.post(job_url(job_id, "retry"), {"next": "https://evil.example/"})
    assert response["Location"] == job_url(job_id)


@pytest.mark.parametrize(
    ("make", "state", "action", "after"),
    [
        ("scheduled", "scheduled", "run_now", "queued"),
        ("scheduled", "scheduled", "cancel", "cancelled"),
        ("queued", "queued", "delete", None),
        ("succeeded", "succeeded", "delete", None),
    ],
)
def test_bulk_actions_of_each_list(
    admin_client_rq: Client, jobs: Jobs, make: str, state: str, action: str, after: str | None
):
    ids = [getattr(jobs, make)() for _ in range(2)]
    listing = admin_client_rq.get(f"{BASE}queues/default/{state}/")
    assert action in [a for a, _ in listing.context["bulk_actions"]]
    form = {"action": action, "ids": ids, "confirm": "yes"}
    assert admin_client_rq.post(f"{BASE}queues/default/selected/", form).status_code == 302
    assert [jobs.state(i) for i in ids] == [after, after]


def test_running_jobs_offer_only_cancel_in_bulk_which_asks_their_workers(
    admin_client_rq: Client, jobs: Jobs
):
    ids = [jobs.running(), jobs.running()]
    listing = admin_client_rq.get(f"{BASE}queues/default/running/")
    assert [name for name, *_ in listing.context["bulk_actions"]] == ["cancel"]
    admin_client_rq.post(
        f"{BASE}queues/default/selected/", {"action": "cancel", "ids": ids, "confirm": "yes"}
    )
    for job_id in ids:
        assert jobs.state(job_id) == "running"
        assert jobs.client.hget(jobs.keys().job(job_id), "cx") is not None


def queue_url(queue: str, action: str) -> str:
    return f"{BASE}queues/{queue}/{action}-queue/"


def test_the_overview_pauses_and_resumes_a_queue_and_logs_it(make_client: MakeClient, jobs: Jobs):
    client = make_client("view_job", "change_job")
    overview = client.get(BASE)
    assert f'action="{queue_url("emails", "pause")}"'.encode() in overview.content
    confirm = client.get(queue_url("emails", "pause"))  # a link, not the button: asks first
    assert confirm.templates[0].name == "admin/django_rqueue/confirm.html"
    assert not queue_counts("emails").paused
    paused = client.post(queue_url("emails", "pause"))
    assert (paused.status_code, paused["Location"]) == (302, BASE)
    assert queue_counts("emails").paused
    assert messages_of(paused) == ["Queue emails paused."]
    overview = client.get(BASE)
    card = next(c for c in overview.context["cards"] if c.counts.queue == "emails")
    assert card.counts.paused and card.toggle_url == queue_url("emails", "resume")
    assert b"Paused" in overview.content
    resumed = client.post(queue_url("emails", "resume"))
    assert messages_of(resumed) == ["Queue emails resumed."]
    assert not queue_counts("emails").paused
    entries = LogEntry.objects.filter(object_id="emails:queue").order_by("pk")
    assert [(e.change_message, e.action_flag) for e in entries] == [
        ("Queue emails paused.", CHANGE),
        ("Queue emails resumed.", CHANGE),
    ]
    again = client.post(queue_url("emails", "resume"))
    assert messages_of(again)[-1] == "Queue emails was not paused."
    assert LogEntry.objects.filter(object_id="emails:queue").count() == 2


def test_pausing_needs_change_permission_and_post(make_client: MakeClient, jobs: Jobs):
    viewer = make_client("view_job", "delete_job")
    assert b"-queue/" not in viewer.get(BASE).content  # no button
    assert viewer.post(queue_url("default", "pause")).status_code == 403
    assert viewer.get(queue_url("default", "pause")).status_code == 403
    assert not queue_counts("default").paused
    assert not LogEntry.objects.exists()
    changer = make_client("change_job")
    assert changer.put(queue_url("default", "pause")).status_code == 405
    assert changer.post(queue_url("nope", "pause")).status_code == 404
    assert changer.post(queue_url("default", "stop")).status_code == 404
    assert not queue_counts("default").paused


def test_csrf_is_enforced_on_pause(make_client: MakeClient):
    client = make_client("change_job", csrf=True)
    assert client.post(queue_url("default", "pause")).status_code == 403
    assert not queue_counts("default").paused


def test_action_labels_are_words_declared_once_and_translatable(
    admin_client_rq: Client, jobs: Jobs
):
    from django.utils.functional import Promise

    from django_rqueue.admin.common import JOB_ACTIONS

    job_id = jobs.scheduled()
    listing = admin_client_rq.get(f"{BASE}queues/default/scheduled/").text
    options = re.findall(r'<option value="(\w+)">([^<]+)</option>', listing)
    assert options == [
        ("run_now", "Run selected jobs now"),
        ("cancel", "Cancel selected jobs"),
        ("delete", "Delete selected jobs"),
    ]
    detail = admin_client_rq.get(job_url(job_id)).text
    buttons = re.findall(r'<a class="button" href="[^"]+">([^<]+)</a>', detail)
    assert buttons == ["Run now", "Cancel", "Delete"]
    confirm = admin_client_rq.get(job_url(job_id, "run_now")).text
    assert "Run this scheduled job now?" in confirm and 'value="Yes, run now"' in confirm
    assert "Runnow" not in listing + detail + confirm
    for action in JOB_ACTIONS.values():
        texts = (action.label, action.selected, action.question, action.confirm, action.done)
        assert all(isinstance(t, Promise) for t in texts)  # gettext_lazy


def test_emptying_a_queue_asks_first_says_what_is_kept_then_deletes_its_queued_jobs_and_logs_it(
    make_client: MakeClient, jobs: Jobs
):
    client = make_client("view_job", "delete_job")
    queued = [jobs.queued(group=g) for g in ("", "a", "b") for _ in range(2)]
    scheduled, running, failed = jobs.scheduled(), jobs.running(), jobs.failed()
    other = jobs.queued(queue="emails")
    empty_url = f"{BASE}queues/default/empty/"
    overview = client.get(BASE).text
    assert f'class="button rq-empty" href="{empty_url}"' in overview
    assert f'href="{BASE}queues/emails/empty/"' in overview
    confirm = client.get(empty_url)
    assert confirm.templates[0].name == "admin/django_rqueue/confirm.html"
    assert "Delete the 6 queued jobs of queue default?" in confirm.text
    notes = confirm.context["notes"]
    assert any("1 scheduled job" in n and "queued when it is due" in n for n in notes)
    assert any("1 running job is not stopped" in n for n in notes)
    assert any("Failed jobs stay" in n for n in notes)
    assert all(jobs.state(j) == "queued" for j in queued)  # GET changed nothing
    done = client.post(empty_url)
    assert (done.status_code, done["Location"]) == (302, BASE)
    assert messages_of(done) == ["Queue default emptied: 6 queued jobs deleted."]
    assert [jobs.state(j) for j in queued] == [None] * 6
    assert queue_counts("default").queued == 0
    assert [jobs.state(j) for j in (scheduled, running, failed)] == [
        "scheduled",
        "running",
        "failed",
    ]
    assert jobs.state(other, "emails") == "queued"
    entry = LogEntry.objects.get(object_id="default:queue")
    assert (entry.change_message, entry.action_flag) == (
        "Queue default emptied: 6 queued jobs deleted.",
        DELETION,
    )


def test_emptying_a_queue_needs_delete_permission_post_and_csrf(
    make_client: MakeClient, jobs: Jobs
):
    job_id = jobs.queued()
    empty_url = f"{BASE}queues/default/empty/"
    changer = make_client("view_job", "change_job")
    assert b'class="button rq-empty"' not in changer.get(BASE).content
    assert b'class="button rq-empty"' not in changer.get(f"{BASE}queues/default/queued/").content
    assert changer.get(empty_url).status_code == 403
    assert changer.post(empty_url).status_code == 403
    deleter = make_client("view_job", "delete_job", csrf=True)
    assert b"Empty this queue" in deleter.get(f"{BASE}queues/default/queued/").content
    assert deleter.post(empty_url).status_code == 403  # no CSRF token
    assert deleter.put(empty_url).status_code in (403, 405)
    assert make_client("delete_job").post(f"{BASE}queues/nope/empty/").status_code == 404
    assert jobs.state(job_id) == "queued"
    assert not LogEntry.objects.exists()


def test_the_failed_jobs_of_all_queues_are_retried_and_deleted_in_bulk(
    admin_client_rq: Client, jobs: Jobs
):
    a, b, c = jobs.failed(), jobs.failed(queue="emails"), jobs.failed(queue="low")
    listing = admin_client_rq.get(f"{BASE}failed/")
    assert [x for x, _label in listing.context["bulk_actions"]] == ["retry", "delete"]
    form = {"action": "retry", "ids": [a, b, "nope:" + "0" * 22], "next": f"{BASE}failed/"}
    confirm = admin_client_rq.post(f"{BASE}failed/selected/", form)
    assert confirm.status_code == 200
    assert "Retry these 2 jobs?" in confirm.text
    done = admin_client_rq.post(f"{BASE}failed/selected/", {**form, "confirm": "yes"})
    assert (done.status_code, done["Location"]) == (302, f"{BASE}failed/")
    assert (jobs.state(a), jobs.state(b, "emails"), jobs.state(c, "low")) == (
        "queued",
        "queued",
        "failed",
    )
    gone = {"action": "delete", "ids": [c], "confirm": "yes"}
    assert admin_client_rq.post(f"{BASE}failed/selected/", gone).status_code == 302
    assert jobs.state(c, "low") is None
    assert LogEntry.objects.filter(object_id__in=[a, b, c]).count() == 3


@pytest.mark.parametrize(
    "path",
    [
        "queues/{queue}/selected/",
        "queues/{queue}/failed/retry-all/",
        "queues/{queue}/pause-queue/",
        "queues/{queue}/empty/",
        "schedules/{entry}/run_now/",
        "jobs/{queue}:AAAAAAAAAAAAAAAAAAAAAA/retry/",
    ],
)
def test_staff_without_the_app_s_permissions_get_403_whether_a_name_exists_or_not(
    make_client: MakeClient, settings: Any, path: str
):
    tick = {"job": "tests.jobs_app.jobs.record", "every": 60, "args": ["/tmp/ledger", "t"]}
    settings.RQUEUE = {**settings.RQUEUE, "SCHEDULE": {"tick": tick}}
    staff = make_client()  # staff, no django_rqueue permission at all
    known = path.format(queue="default", entry="tick")
    unknown = path.format(queue="no-such-queue", entry="no-such-entry")
    for url in (known, unknown):
        assert staff.post(f"{BASE}{url}", {"action": "retry"}).status_code == 403, url
