"""Every admin page renders, with the right data, and refuses whom it must."""

from __future__ import annotations

import re
import socket
from typing import Any
from urllib.parse import quote
from zoneinfo import ZoneInfo

import pytest
import redis
from django.contrib.admin.utils import quote as admin_quote
from django.test import Client
from django.urls import reverse

from django_rqueue.engine.fields import JobFields
from django_rqueue.execution import error_record
from django_rqueue.master.heartbeat import publish
from django_rqueue.ops import listings
from django_rqueue.ops.workers import WorkerInfo, WorkerJob
from tests.jobs_app.jobs import record
from tests.support import transitions
from tests.support.jobs_in_state import Jobs, retention

from .conftest import BASE, MakeClient


def job_url(job_id: str, action: str = "") -> str:
    # The admin quotes ids in URLs as it does object ids (":" -> "_3A", "_" -> "_5F").
    path = f"{BASE}jobs/{admin_quote(job_id)}/"
    return f"{path}{action}/" if action else path


def test_the_admin_index_has_an_rqueue_section(admin_client_rq: Client):
    response = admin_client_rq.get("/admin/")
    assert response.status_code == 200
    assert b"Rqueue" in response.content
    assert BASE.encode() in response.content


def test_overview_shows_counts_chart_and_warns_without_workers(admin_client_rq: Client, jobs: Jobs):
    jobs.queued()
    jobs.queued(group="g2")
    jobs.scheduled()
    jobs.running()
    jobs.failed()
    jobs.failed()
    jobs.succeeded()
    response = admin_client_rq.get(BASE)
    assert response.status_code == 200
    card = next(c for c in response.context["cards"] if c.counts.queue == "default")
    c = card.counts
    assert (c.queued, c.scheduled, c.running, c.failed) == (2, 1, 0 + 1, 2)
    assert c.oldest_queued_at is not None
    assert (card.succeeded_hour, card.failed_hour) == (1, 2)
    assert len(card.bars) == 60
    assert b"<svg" in response.content
    assert any("No worker" in w for w in response.context["warnings"])
    assert response.context["site_header"]  # each_context of the admin site


def test_overview_shows_the_rate_limit_of_a_limited_queue(admin_client_rq: Client, settings: Any):
    queues = {**settings.RQUEUE["QUEUES"], "emails": {"rate_limit": "100/s"}}
    settings.RQUEUE = {**settings.RQUEUE, "QUEUES": queues}
    response = admin_client_rq.get(BASE)
    cards = {c.counts.queue: c for c in response.context["cards"]}
    assert (cards["emails"].rate_limit, cards["default"].rate_limit) == ("100/s", "")
    assert response.content.count(b"rate limit 100/s") == 1


def test_overview_warns_when_scheduled_jobs_are_overdue(admin_client_rq: Client, jobs: Jobs):
    job_id = jobs.scheduled()
    jobs.client.zadd(jobs.keys().delayed, {job_id: 1_000})
    response = admin_client_rq.get(BASE)
    assert any("overdue" in w for w in response.context["warnings"])


@pytest.mark.parametrize("state", ["queued", "scheduled", "running", "failed", "succeeded"])
def test_each_state_lists_its_jobs(admin_client_rq: Client, jobs: Jobs, state: str):
    job_id = getattr(jobs, state)()
    response = admin_client_rq.get(f"{BASE}queues/default/{state}/")
    assert response.status_code == 200
    assert [r["id"] for r in response.context["rows"]] == [job_id]
    assert job_id.encode() in response.content


def test_failed_list_shows_error_class_and_message_newest_first(
    admin_client_rq: Client, jobs: Jobs
):
    first = jobs.failed(message="first")
    second = jobs.failed(message="second")
    jobs.client.zadd(jobs.keys().failed, {first: 1, second: 2})
    rows = admin_client_rq.get(f"{BASE}queues/default/failed/").context["rows"]
    assert [r["id"] for r in rows] == [second, first]
    assert "ValueError: second" in rows[0]["cells"]


def test_overview_and_failed_list_show_the_failed_jobs_deleted_by_retention(
    admin_client_rq: Client, jobs: Jobs, settings: Any
):
    queues = {**settings.RQUEUE["QUEUES"], "default": {"failed_max": 2, "failed_ttl": 7 * 86400}}
    settings.RQUEUE = {**settings.RQUEUE, "QUEUES": queues}
    ids = [jobs.failed() for _ in range(5)]
    overview = admin_client_rq.get(BASE)
    card = next(c for c in overview.context["cards"] if c.counts.queue == "default")
    assert (card.counts.failed, card.counts.trimmed) == (2, 3)
    assert b"3 deleted (retention)" in overview.content
    failed = admin_client_rq.get(f"{BASE}queues/default/failed/")
    # Oldest first; jobs failed in the same ms go in id order (the data-model page), so the
    # kept two are the newest only up to such ties: check what was listed, and deleted.
    listed = {r["id"] for r in failed.context["rows"]}
    assert len(listed) == 2 and listed <= set(ids)
    assert all(not jobs.client.exists(jobs.keys().job(i)) for i in set(ids) - listed)
    assert failed.context["retention"] == (
        "Failed jobs are deleted 7 days after they failed, and at most 2 are kept, the oldest"
        " deleted first. 3 failed jobs were deleted by this rule so far."
    )
    assert b'id="rq-retention"' in failed.content
    assert admin_client_rq.get(job_url(ids[0])).status_code == 404  # its record is gone


@pytest.mark.parametrize(
    ("options", "rule"),
    [
        ({"failed_ttl": None, "failed_max": None}, "kept until they are retried or deleted"),
        ({"failed_ttl": 5400, "failed_max": None}, "deleted 90 minutes after they failed"),
        ({"failed_ttl": None, "failed_max": 1}, "At most 1 failed jobs are kept"),
    ],
)
def test_the_failed_list_words_each_retention(
    admin_client_rq: Client, settings: Any, options: dict[str, int | None], rule: str
):
    queues = {**settings.RQUEUE["QUEUES"], "default": options}
    settings.RQUEUE = {**settings.RQUEUE, "QUEUES": queues}
    retention = admin_client_rq.get(f"{BASE}queues/default/failed/").context["retention"]
    assert rule in retention
    assert retention.endswith("0 failed jobs were deleted by this rule so far.")


def test_an_expired_job_shows_its_expiry_and_the_reason_it_was_cancelled(
    admin_client_rq: Client, jobs: Jobs
):
    now_ms = jobs.client.time()[0] * 1000
    gone = jobs.queued(expires_at_ms=now_ms - 1000)
    waiting = jobs.queued(expires_in_ms=3_600_000)
    assert transitions.reserve(jobs.client, jobs.keys(), lease_ms=60_000, worker_id="w") is not None
    page = admin_client_rq.get(job_url(gone))
    assert page.context["job"].status == "cancelled"
    assert page.context["cancel_reason"] == "expired: not started before its expiry"
    content = page.content.decode()
    assert 'id="rq-cancel-reason">(expired: not started before its expiry)' in content
    assert 'id="rq-expires"' in content
    assert [a[0] for a in page.context["actions"]] == ["delete"]
    assert b'id="rq-cancel-reason"' not in admin_client_rq.get(job_url(waiting)).content
    overview = admin_client_rq.get(BASE)
    card = next(c for c in overview.context["cards"] if c.counts.queue == "default")
    assert card.counts.expired == 1
    assert b"1 expired" in overview.content


def test_lists_paginate_with_ranged_reads(admin_client_rq: Client, jobs: Jobs):
    ids = [jobs.scheduled() for _ in range(120)]
    response = admin_client_rq.get(f"{BASE}queues/default/scheduled/?page=3")
    assert response.context["page_obj"].paginator.count == 120
    assert [r["id"] for r in response.context["rows"]] == sorted(
        ids, key=lambda i: (jobs.client.zscore(jobs.keys().delayed, i), i)
    )[100:]


def test_name_filter_and_cursor(admin_client_rq: Client, jobs: Jobs):
    for n in range(6):
        jobs.failed(name="a" if n % 2 else "b")
    response = admin_client_rq.get(f"{BASE}queues/default/failed/?name=a")
    assert {r["name"] for r in response.context["rows"]} == {"a"}
    assert len(response.context["rows"]) == 3
    assert response.context["next_cursor"] is None


def test_queued_jobs_by_priority_and_group(admin_client_rq: Client, jobs: Jobs):
    a = jobs.queued(group="user:a", priority=5)
    jobs.queued(group="user:b", priority=5)
    low = jobs.queued(priority=-3)
    groups = admin_client_rq.get(f"{BASE}queues/default/queued/")
    assert groups.context["priorities"] == [5, -3]
    assert [g.group for g in groups.context["groups_page"]] == ["user:a", "user:b"]
    assert groups.context["groups_page"][0].backlog == 1
    one = admin_client_rq.get(f"{BASE}queues/default/queued/?prio=5&group=user:a")
    assert [r["id"] for r in one.context["rows"]] == [a]
    single = admin_client_rq.get(f"{BASE}queues/default/queued/?prio=-3")
    assert [r["id"] for r in single.context["rows"]] == [low]


def test_a_group_parked_at_its_cap_is_listed_and_marked(admin_client_rq: Client, jobs: Jobs):
    first = jobs.queued(group="user:a", priority=5)
    jobs.queued(group="user:a", priority=5)
    jobs.queued(group="user:b", priority=5)
    got = transitions.reserve(
        jobs.client, jobs.keys(), lease_ms=60_000, worker_id="w", group_concurrency=1
    )
    assert got is not None and got[0] == first  # user:a is at its cap of 1, one job queued
    page = admin_client_rq.get(f"{BASE}queues/default/queued/?prio=5")
    assert page.context["priorities"] == [5]
    rows = [(g.group, g.parked) for g in page.context["groups_page"]]
    assert rows == [("user:b", False), ("user:a", True)]
    assert b"at its concurrency cap" in page.content


def test_job_detail_shows_everything_escaped(admin_client_rq: Client, jobs: Jobs):
    job_id = jobs.failed(payload='{"a": ["<script>x</script>"], "k": {"n": 1}}')
    response = admin_client_rq.get(job_url(job_id))
    assert response.status_code == 200
    assert b"<script>x</script>" not in response.content
    assert b"&lt;script&gt;x&lt;/script&gt;" in response.content
    assert b"Traceback (most recent call last)" in response.content
    assert response.context["job"].status == "failed"
    assert [a[0] for a in response.context["actions"]] == ["retry", "cancel", "delete"]


def test_job_detail_shows_the_headers_middleware_added_escaped(
    admin_client_rq: Client, settings: Any, jobs: Jobs
) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "MIDDLEWARE": ["tests.jobs_app.middleware.First"]}
    job = record.using(on_commit=False).delay("/dev/null", "<b>x</b>")
    page = admin_client_rq.get(job_url(job.id))
    assert page.context["headers"] == [("order", "1"), ("seen-1", f"{record.name}@default")]
    assert b'id="rq-headers"' in page.content
    assert f"<code>{record.name}@default</code>".encode() in page.content
    plain = admin_client_rq.get(job_url(jobs.failed()))
    assert plain.context["headers"] == [] and b'id="rq-headers"' not in plain.content
    marked = jobs.failed()
    jobs.client.hset(jobs.keys().job(marked), JobFields.HEADERS, '{"x": "<i>y</i>"}')
    shown = admin_client_rq.get(job_url(marked)).content
    assert b"<i>y</i>" not in shown and b"&lt;i&gt;y&lt;/i&gt;" in shown


def test_a_corrupt_job_still_renders_with_its_problems(admin_client_rq: Client, jobs: Jobs):
    job_id = jobs.failed()
    key = jobs.keys().job(job_id)
    jobs.client.hset(key, mapping={"p": b"\xff{not json", "err:1": "nope", "s": "??"})
    response = admin_client_rq.get(job_url(job_id))
    assert response.status_code == 200
    assert response.context["job"].problems
    assert b"Corrupt record" in response.content
    listing = admin_client_rq.get(f"{BASE}queues/default/failed/")
    assert listing.status_code == 200


@pytest.mark.parametrize(
    "path",
    [
        "jobs/default_3A" + "0" * 22 + "/",
        "jobs/nonsense/",
        "jobs/nope_3A" + "0" * 22 + "/",
        "jobs/default_3A" + "0" * 22 + "/retry/",
        "queues/nope/failed/",
        "queues/default/bogus/",
        "queues/default/failed/zap-all/",
    ],
)
def test_missing_things_are_404(admin_client_rq: Client, path: str):
    assert admin_client_rq.get(BASE + path).status_code == 404


def test_search_by_id_redirects_to_the_job(admin_client_rq: Client, jobs: Jobs):
    job_id = jobs.queued()
    response = admin_client_rq.get(BASE, {"id": job_id})
    assert response.status_code == 302
    assert response["Location"] == job_url(job_id)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("garbage", "garbage is not a job id."),
        ("nope:" + "0" * 22, "is not a job id."),  # no such queue
        ("default:" + "0" * 22, "No job has the id default:" + "0" * 22),
        ("0" * 22, "No job has the id " + "0" * 22),
    ],
)
def test_search_by_an_unknown_or_malformed_id_stays_on_the_overview_with_a_message(
    admin_client_rq: Client, text: str, says: str
):
    response = admin_client_rq.get(BASE, {"id": text}, follow=True)
    assert response.status_code == 200
    assert response.redirect_chain == [(BASE, 302)]
    assert response.templates[0].name == "admin/django_rqueue/overview.html"
    [message] = [str(m) for m in response.context["messages"]]
    assert says in message


def test_search_by_the_id_without_its_queue_finds_the_job_in_any_queue(
    admin_client_rq: Client, jobs: Jobs
):
    job_id = jobs.failed(queue="emails")
    bare = job_id.split(":", 1)[1]
    response = admin_client_rq.get(BASE, {"id": f"  {bare} "})
    assert response.status_code == 302
    assert response["Location"] == job_url(job_id)


def test_non_staff_are_sent_to_the_login_page(make_client: MakeClient):
    client = make_client("view_job", staff=False)
    response = client.get(BASE)
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


def test_anonymous_users_are_sent_to_the_login_page(client: Client, db: None):
    response = client.get(BASE)
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


@pytest.mark.parametrize("path", ["", "queues/default/failed/"])
def test_staff_without_view_permission_get_403(make_client: MakeClient, path: str):
    assert make_client().get(BASE + path).status_code == 403


def test_view_only_staff_see_no_action_buttons(make_client: MakeClient, jobs: Jobs):
    client = make_client("view_job")
    job_id = jobs.failed()
    listing = client.get(f"{BASE}queues/default/failed/")
    assert listing.status_code == 200
    assert listing.context["bulk_actions"] == []
    assert b"Retry all failed" not in listing.content
    detail = client.get(job_url(job_id))
    assert detail.context["actions"] == []
    assert quote(job_url(job_id, "retry")).encode() not in detail.content
    quote_free = job_url(job_id, "retry").encode()
    assert quote_free not in detail.content


def test_overview_lists_the_workers_of_the_registry(admin_client_rq: Client, jobs: Jobs):
    running = jobs.running()
    publish(
        WorkerInfo(
            id="web-1:4242:abc123",
            host="web-1",
            pid=4242,
            queues=("default", "emails"),
            jobs=(WorkerJob(running, "default"),),
        ),
        ttl=30,
    )
    response = admin_client_rq.get(BASE)
    [worker] = response.context["workers"]
    assert (worker["host"], worker["pid"], worker["queues"]) == ("web-1", 4242, "default, emails")
    assert worker["jobs"] == [running]
    assert worker["heartbeat"] is not None
    assert not any("No worker" in w for w in response.context["warnings"])
    assert b"web-1:4242:abc123" in response.content


def test_a_succeeded_job_shows_its_result(admin_client_rq: Client, jobs: Jobs):
    job_id = jobs.succeeded()
    response = admin_client_rq.get(job_url(job_id))
    assert response.context["result"] == '{\n  "ok": 1\n}'
    assert [a[0] for a in response.context["actions"]] == ["delete"]


def test_overview_warns_when_no_worker_runs_a_poller(admin_client_rq: Client):
    publish(WorkerInfo(id="w:1:a", host="w", pid=1, poller=False), ttl=30)
    response = admin_client_rq.get(BASE)
    assert any("poller" in w for w in response.context["warnings"])
    publish(WorkerInfo(id="w:2:b", host="w", pid=2, poller=True), ttl=30)
    response = admin_client_rq.get(BASE)
    assert not any("poller" in w for w in response.context["warnings"])


def test_a_name_filter_scans_a_bounded_window_and_continues(
    admin_client_rq: Client, jobs: Jobs, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(listings, "SCAN_LIMIT", 4)
    monkeypatch.setattr(listings, "SCAN_CHUNK", 2)
    wanted = [jobs.scheduled(name="b" if n in (1, 6) else "a") for n in range(8)]
    ordered = sorted(wanted, key=lambda i: (jobs.client.zscore(jobs.keys().delayed, i), i))
    expected = [i for i in ordered if jobs.client.hget(jobs.keys().job(i), "n") == b"b"]
    url = f"{BASE}queues/default/scheduled/"
    first = admin_client_rq.get(url, {"name": "b"})
    found = [r["id"] for r in first.context["rows"]]
    assert first.context["scanned"] == 4 and first.context["next_cursor"] == 4
    rest = admin_client_rq.get(url, {"name": "b", "cursor": first.context["next_cursor"]})
    found += [r["id"] for r in rest.context["rows"]]
    assert rest.context["next_cursor"] is None
    assert found == expected
    assert b"Continue searching" in first.content


def test_a_job_page_is_found_by_the_url_reverse_gives_for_its_plain_id(
    admin_client_rq: Client, jobs: Jobs
):
    """``reverse(..., args=[job.id])`` (what a receiver linking to the job would write) puts
    the id in the URL unquoted; read as quoted, ``_3A`` and ``_5F`` in it were decoded into
    another id, a 404."""
    job_id = jobs.failed(job_id="default:order_3A44_5Fx")
    for page, action in ((job_url(job_id), ""), (job_url(job_id, "retry"), "retry")):
        name, args = ("job_action", [job_id, action]) if action else ("job_change", [job_id])
        plain = reverse(f"admin:django_rqueue_{name}", args=args)
        assert plain != page and ":" in plain
        for url in (page, plain):
            response = admin_client_rq.get(url)
            assert response.status_code == 200, url
            assert job_id in response.text, url
    assert admin_client_rq.post(plain).status_code == 302  # "Yes, retry", from the plain URL
    assert jobs.state(job_id) == "queued"


def _breadcrumbs(html: str) -> tuple[str, list[str]]:
    """The tag of the breadcrumbs container and its texts, one per crumb."""
    match = re.search(r'<(ol|div) class="breadcrumbs">(.*?)</\1>', html, re.S)
    assert match, "no breadcrumbs"
    tag, inner = match.groups()
    if tag == "ol":
        items = re.findall(r"<li[^>]*>(.*?)</li>", inner, re.S)
    else:
        items = inner.split("&rsaquo;")
    return tag, [re.sub(r"<[^>]+>", "", i).strip() for i in items]


def test_breadcrumbs_use_the_markup_of_the_running_django(admin_client_rq: Client, jobs: Jobs):
    job_id = jobs.failed()
    django_tag, django_crumbs = _breadcrumbs(admin_client_rq.get("/admin/auth/user/").text)
    assert django_crumbs[0] == "Home"
    expected = {
        BASE: ["Home", "Rqueue", "Queues and jobs"],
        f"{BASE}queues/default/failed/": [
            "Home",
            "Rqueue",
            "Queues and jobs",
            "default",
            "Failed jobs",
        ],
        job_url(job_id): ["Home", "Rqueue", "Queues and jobs", "default", "Failed jobs", job_id],
        job_url(job_id, "retry"): ["Home", "Rqueue", "Queues and jobs", "default", "Are you sure?"],
        f"{BASE}schedules/": ["Home", "Rqueue", "Queues and jobs", "Periodic jobs"],
    }
    for path, crumbs in expected.items():
        html = admin_client_rq.get(path).text
        assert _breadcrumbs(html) == (django_tag, crumbs), path
        if django_tag == "ol":  # Django 6.1: the current page is marked, not linked
            assert f'<li aria-current="page">{crumbs[-1]}</li>' in html, path
            # Only the last: Django's CSS puts no "›" after a crumb marked current, so a
            # crumb without a link before it ("default") would run into the next one.
            crumbs_html = re.search(r'<ol class="breadcrumbs">.*?</ol>', html, re.S)
            assert crumbs_html and crumbs_html.group(0).count('aria-current="page"') == 1, path


def test_the_index_links_the_overview_as_view_and_its_title_matches(admin_client_rq: Client):
    index = admin_client_rq.get("/admin/").text
    row = re.search(r'<tr class="model-dashboard">.*?</tr>', index, re.S)
    assert row, index
    assert "Queues and jobs" in row.group(0)
    assert "Change" not in row.group(0) and "changelink" not in row.group(0)
    assert "View" in row.group(0)
    overview = admin_client_rq.get(BASE)
    assert overview.context["title"] == "Queues and jobs"
    assert "<title>Queues and jobs |" in overview.text


def test_with_redis_down_the_overview_does_not_claim_no_worker_was_seen(
    admin_client_rq: Client, settings: Any
):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens there once closed
    settings.RQUEUE = {**settings.RQUEUE, "REDIS_URL": f"redis://127.0.0.1:{port}/0"}
    response = admin_client_rq.get(BASE)
    assert response.status_code == 200
    assert all(c.counts.error for c in response.context["cards"])
    assert response.context["warnings"] == []
    assert "No worker" not in response.text
    assert "Unknown: the workers cannot be read." in response.text


def test_refused_credentials_are_shown_as_such_naming_the_server(
    admin_client_rq: Client, settings: Any
):
    url = settings.RQUEUE["REDIS_URL"]
    wrong = url.replace("redis://", "redis://nobody:s3cret@")
    settings.RQUEUE = {**settings.RQUEUE, "REDIS_URL": wrong}
    response = admin_client_rq.get(BASE)
    assert response.status_code == 200
    errors = {c.counts.error for c in response.context["cards"]}
    assert errors == {
        f"Redis at {url.replace('redis://', 'redis://nobody@')} rejected the credentials "
        "(invalid username-password pair or user is disabled.): fix the user/password in the "
        "Redis URL (redis://user:password@host:port/db)"
    }
    assert "s3cret" not in response.text


def test_a_user_whose_key_pattern_misses_the_prefix_is_shown_as_refused_not_a_500(
    admin_client_rq: Client, settings: Any, redis_client: redis.Redis
):
    redis_client.execute_command(
        "ACL", "SETUSER", "elsewhere", "reset", "on", ">s3cret", "~other:*", "+@all"
    )
    url = settings.RQUEUE["REDIS_URL"]
    host = url.rsplit("@", 1)[-1].removeprefix("redis://")
    settings.RQUEUE = {**settings.RQUEUE, "REDIS_URL": f"redis://elsewhere:s3cret@{host}"}
    try:
        response = admin_client_rq.get(BASE)
    finally:
        redis_client.acl_deluser("elsewhere")

    assert response.status_code == 200
    errors = [c.counts.error for c in response.context["cards"]]
    refused = f"Redis at redis://elsewhere@{host} refused a command to the Redis user"
    assert errors and all(e and e.startswith(refused) and "~rqueue:*" in e for e in errors)
    assert "s3cret" not in response.text


def _pager(html: str) -> str:
    match = re.search(r'<p class="paginator">(.*?)</p>', html, re.S)
    assert match, "no pager"
    return " ".join(re.sub(r"<[^>]+>", " ", match.group(1)).split())


def test_the_pager_reads_like_djangos(admin_client_rq: Client, jobs: Jobs):
    jobs.failed()
    assert _pager(admin_client_rq.get(f"{BASE}queues/default/failed/").text) == "1 job"
    for _ in range(5):
        jobs.failed()
    assert _pager(admin_client_rq.get(f"{BASE}queues/default/failed/").text) == "6 jobs"
    for _ in range(51):
        jobs.scheduled()
    html = admin_client_rq.get(f"{BASE}queues/default/scheduled/?page=2").text
    assert _pager(html) == "1 2 51 jobs"
    assert '<span class="this-page">2</span>' in html and 'href="?page=1"' in html


def test_the_job_page_shows_settings_and_times_in_peoples_units(
    admin_client_rq: Client, jobs: Jobs, settings: Any
):
    settings.TIME_ZONE = "Asia/Kolkata"  # UTC+05:30, no daylight saving time
    job_id = jobs.running(timeout_ms=1500, ttl=7200, unique_key="order:7", unique_ttl=60)
    err = error_record(ValueError("boom"), "Traceback (most recent call last):\n", worker="w1")
    kept = retention("default")
    transitions.fail(jobs.client, jobs.keys(), job_id, 1, err, -1, retention=kept)
    response = admin_client_rq.get(job_url(job_id))
    html = response.text
    job = response.context["job"]
    rows = {label: value for label, value, _id in response.context["options"]}
    assert rows["Time limit per attempt"] == "1.5 seconds"
    assert rows["Kept after it ends"] == "2 hours"
    assert rows["Unique key"] == "order:7"
    spent = (job.finished_at - job.started_at).total_seconds()
    assert rows["Duration of the last attempt"] == f"{round(spent, 3):g} seconds"
    for raw in ("timeout_ms", "result_ttl", "run_at", ">token<", "1500<", "7200<"):
        assert raw not in html
    local = job.enqueued_at.astimezone(ZoneInfo("Asia/Kolkata"))
    assert f"{local:%Y-%m-%d %H:%M:%S} IST" in html
    attempt = re.search(r'<p class="help rq-attempt-meta">(.*?)</p>', html, re.S)
    assert attempt
    failed_at = job.finished_at.astimezone(ZoneInfo("Asia/Kolkata"))
    assert f"{failed_at:%Y-%m-%d %H:%M:%S} IST" in attempt.group(1)
    assert "on worker w1" in attempt.group(1)


def test_a_running_job_shows_its_worker_and_for_how_long_it_runs(
    admin_client_rq: Client, jobs: Jobs
):
    job_id = jobs.running(timeout_ms=None)
    response = admin_client_rq.get(job_url(job_id))
    rows = {label: value for label, value, _id in response.context["options"]}
    assert rows["Worker"] == "w1"
    assert rows["Time limit per attempt"] == "300 seconds"  # the default
    assert rows["Running for"].endswith(" seconds")


def test_failed_jobs_of_all_queues_newest_first_paged_by_per_queue_offsets(
    admin_client_rq: Client, jobs: Jobs, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr("django_rqueue.admin.lists.PAGE_SIZE", 3)
    made = [jobs.failed(queue=q) for q in ("default", "emails", "low", "emails") * 2]
    assert f'href="{BASE}failed/"'.encode() in admin_client_rq.get(BASE).content
    seen: list[str] = []
    pages = 0
    path = f"{BASE}failed/"
    while True:
        response = admin_client_rq.get(path)
        assert response.status_code == 200
        pages += 1
        rows = response.context["rows"]
        assert len(rows) <= 3
        assert all(r["queue"] == r["id"].split(":")[0] for r in rows)
        seen += [r["id"] for r in rows]
        assert _pager(response.text).endswith("8 jobs")
        if not response.context["next_page"]:
            break
        path = f"{BASE}failed/?after={response.context['next_page']}"
    assert pages == 3
    assert sorted(seen) == sorted(made)  # each once
    failed_at = [jobs.client.zscore(jobs.keys(i.split(":")[0]).failed, i) or 0.0 for i in seen]
    assert failed_at == sorted(failed_at, reverse=True)
    bad = admin_client_rq.get(f"{BASE}failed/?after=garbage")  # back to the first page
    assert [r["id"] for r in bad.context["rows"]] == seen[:3]


def test_failed_jobs_of_all_queues_say_so_when_there_are_none(admin_client_rq: Client):
    response = admin_client_rq.get(f"{BASE}failed/")
    assert "No failed jobs." in response.text
    assert _pager(response.text) == "0 jobs"


def test_breadcrumbs_before_django_6_1_are_its_div_with_rsaquo_separators(
    admin_client_rq: Client, jobs: Jobs, monkeypatch: pytest.MonkeyPatch
):
    """Django 5.2 and 6.0 write ``<div class="breadcrumbs">`` with ``&rsaquo;`` between links
    (their admin/base.html and change_list.html), and style only that."""
    monkeypatch.setattr("django_rqueue.admin.common.BREADCRUMBS_AS_LIST", False)
    job_id = jobs.failed()
    html = admin_client_rq.get(job_url(job_id)).text
    assert '<ol class="breadcrumbs">' not in html
    assert _breadcrumbs(html) == (
        "div",
        ["Home", "Rqueue", "Queues and jobs", "default", "Failed jobs", job_id],
    )
    assert f'<a href="{BASE}queues/default/failed/">Failed jobs</a>' in html


def test_each_failed_attempt_shows_when_it_failed_and_on_which_worker(
    admin_client_rq: Client, jobs: Jobs
):
    job_id = jobs.running(max_attempts=2)
    keys, kept = jobs.keys(), retention("default")
    for token, worker, delay in ((1, "w1", 0), (2, "w2", -1)):
        err = error_record(ValueError(f"try {token}"), "", worker=worker)
        transitions.fail(jobs.client, keys, job_id, token, err, delay, retention=kept)
        if delay >= 0:
            assert transitions.promote_due(jobs.client, keys, 10)[0] == 1
            got = transitions.reserve(jobs.client, keys, lease_ms=60_000, worker_id="w2")
            assert got is not None and got[0] == job_id
    response = admin_client_rq.get(job_url(job_id))
    errors = [e for _n, e in response.context["errors"]]
    assert [e["worker"] for e in errors] == ["w1", "w2"]
    assert errors[0]["at"] <= errors[1]["at"] == response.context["job"].finished_at
    metas = re.findall(r'<p class="help rq-attempt-meta">(.*?)</p>', response.text, re.S)
    assert len(metas) == 2
    for meta, error in zip(metas, errors, strict=True):
        assert f"{error['at']:%Y-%m-%d %H:%M:%S} UTC" in meta
        assert f"on worker {error['worker']}" in meta
