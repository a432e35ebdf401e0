"""A real browser (Playwright driving Debian's Chromium) retries a failed job in the admin,
and pauses and resumes its queue from the overview.

Needs ``/usr/bin/chromium`` (``scripts/bootstrap.sh`` installs it) and the
``playwright`` package (dev extra). Without them the test is skipped locally
and fails in CI (``CI`` set). Screenshots go to ``artifacts/admin/``.
"""

from __future__ import annotations

import importlib
import os
import threading
from pathlib import Path
from typing import Any, cast

import pytest
import redis
from django.contrib import admin

from tests.jobs_app.jobs import read_ledger
from tests.support.inprocess import run_worker
from tests.support.jobs_in_state import Jobs

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "admin"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _require_browser() -> Any:  # the playwright module
    try:
        sync_api: Any = importlib.import_module("playwright.sync_api")
    except ImportError:
        sync_api = None
    missing = "playwright is not installed" if sync_api is None else ""
    if not CHROMIUM.exists():
        missing = f"{CHROMIUM} is missing (scripts/bootstrap.sh installs it)"
    if missing:
        if os.environ.get("CI"):
            pytest.fail(missing)
        pytest.skip(missing)
    return sync_api


def burst_worker() -> None:
    """A burst worker on "default", in a thread (Playwright's event loop owns this one)."""
    thread = threading.Thread(target=run_worker, args=(["default"],), kwargs={"burst": True})
    thread.start()
    thread.join(60)
    assert not thread.is_alive()


@pytest.fixture
def staff_site(settings: Any, django_user_model: Any) -> None:
    """The live server's admin styled, a superuser ``staff`` / ``s3cret-pass``, and
    the screenshots' folder."""
    # The live server serves STATIC_URL from STATIC_ROOT (tests.settings has no
    # staticfiles app): point it at the admin's own CSS and JS.
    settings.STATIC_ROOT = str(Path(admin.__file__).parent / "static")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    django_user_model.objects.create_superuser("staff", "staff@example.com", "s3cret-pass")


@pytest.mark.slow
@pytest.mark.usefixtures("staff_site")
def test_staff_retry_a_failed_job_in_chromium_pause_and_resume_and_a_worker_runs_it(
    live_server: Any,
    django_user_model: Any,
    rqueue_redis: redis.Redis,
    tmp_path: Path,
    settings: Any,
):
    sync_api = _require_browser()
    jobs = Jobs(rqueue_redis)
    ledger = str(tmp_path / "ledger.jsonl")
    payload = f'{{"a": ["{ledger}", "retried"], "k": {{}}}}'
    for n in range(3):
        jobs.succeeded(name="tests.jobs_app.jobs.record")
        jobs.failed(name="tests.jobs_app.jobs.other", message=f"older failure {n}")
    job_id = jobs.failed(name="tests.jobs_app.jobs.record", payload=payload, message="SMTP down")
    jobs.scheduled(name="tests.jobs_app.jobs.record")

    with sync_api.sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "profile"),  # a fresh --user-data-dir
            executable_path=str(CHROMIUM),
            headless=True,
            args=ARGS,
            viewport={"width": 1280, "height": 800},
        )
        try:
            page = context.new_page()
            page.set_default_timeout(15_000)
            page.goto(f"{live_server.url}/admin/django_rqueue/dashboard/")
            page.fill("#id_username", "staff")
            page.fill("#id_password", "s3cret-pass")
            page.click("input[type=submit]")
            page.wait_for_selector("#rq-queues")
            assert page.inner_text("#rq-queue-default td:nth-child(6)") == "4"
            page.screenshot(path=str(ARTIFACTS / "overview.png"), full_page=True)

            page.click("#rq-queue-default td:nth-child(6) a")
            page.wait_for_selector("#result_list")
            assert "SMTP down" in page.inner_text("#result_list")
            page.screenshot(path=str(ARTIFACTS / "failed-list.png"), full_page=True)

            page.click(f"#result_list a:text('{job_id}')")
            page.wait_for_selector("#rq-job")
            detail_url = page.url
            assert page.inner_text("#rq-status") == "failed"
            page.click("#rq-job-actions a:text('Retry')")
            page.wait_for_selector("#rq-question")
            page.click("input[type=submit]")
            page.wait_for_selector(".messagelist .success")  # back on the failed list
            assert job_id not in page.inner_text("#result_list")
            page.goto(detail_url)
            assert page.inner_text("#rq-status") == "queued"

            # Pause the queue from the overview: a (burst) worker leaves the job queued.
            page.goto(f"{live_server.url}/admin/django_rqueue/dashboard/")
            page.click("#rq-queue-default .rq-toggle input[type=submit]")
            page.wait_for_selector(".messagelist .success")
            assert "Paused" in page.inner_text("#rq-queue-default .rq-state")
            assert page.input_value("#rq-queue-default .rq-toggle input[type=submit]") == "Resume"
            page.screenshot(path=str(ARTIFACTS / "overview-paused.png"), full_page=True)
            burst_worker()
            page.goto(detail_url)
            assert page.inner_text("#rq-status") == "queued"

            # Resume it: the worker runs the job.
            page.goto(f"{live_server.url}/admin/django_rqueue/dashboard/")
            page.click("#rq-queue-default .rq-toggle input[type=submit]")
            page.wait_for_selector(".messagelist .success")
            assert "Active" in page.inner_text("#rq-queue-default .rq-state")
            burst_worker()
            page.goto(detail_url)
            assert page.inner_text("#rq-status") == "succeeded"
            page.screenshot(path=str(ARTIFACTS / "job-succeeded.png"), full_page=True)
        finally:
            context.close()
    assert [e["tag"] for e in read_ledger(ledger)] == ["retried"]


@pytest.mark.slow
@pytest.mark.usefixtures("staff_site")
def test_staff_pause_resume_and_run_a_periodic_job_in_chromium(
    live_server: Any,
    django_user_model: Any,
    rqueue_redis: redis.Redis,
    tmp_path: Path,
    settings: Any,
):
    from django_rqueue.worker.scheduler import Scheduler

    sync_api = _require_browser()
    ledger = str(tmp_path / "ledger.jsonl")
    settings.RQUEUE = {
        **settings.RQUEUE,
        "SCHEDULE": {
            "nightly": {
                "job": "tests.jobs_app.jobs.record",
                "cron": "30 2 * * *",
                "timezone": "Europe/Paris",
                "args": [ledger, "nightly"],
            },
        },
    }
    Scheduler(["default"]).run_once()  # a poller stored the entry and its next tick

    with sync_api.sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "profile"),
            executable_path=str(CHROMIUM),
            headless=True,
            args=ARGS,
            viewport={"width": 1280, "height": 800},
        )
        try:
            page = context.new_page()
            page.set_default_timeout(15_000)
            page.goto(f"{live_server.url}/admin/django_rqueue/dashboard/")
            page.fill("#id_username", "staff")
            page.fill("#id_password", "s3cret-pass")
            page.click("input[type=submit]")
            page.wait_for_selector("#rq-queues")
            page.click("#rq-schedules-link a")
            page.wait_for_selector("#rq-schedules")
            row = "#rq-entry-nightly"
            assert "30 2 * * * (Europe/Paris)" in page.inner_text(row)
            assert page.inner_text(f"{row} .rq-paused") == "no"

            page.click(f"{row} .rq-actions a:text('Pause')")
            page.wait_for_selector("#rq-question")
            page.click("input[type=submit]")
            page.wait_for_selector(".messagelist .success")
            assert page.inner_text(f"{row} .rq-paused") == "yes"
            page.screenshot(path=str(ARTIFACTS / "schedules-paused.png"), full_page=True)

            page.click(f"{row} .rq-actions a:text('Resume')")
            page.wait_for_selector("#rq-question")
            page.click("input[type=submit]")
            page.wait_for_selector(".messagelist .success")
            assert page.inner_text(f"{row} .rq-paused") == "no"

            page.click(f"{row} .rq-actions a:text('Run now')")
            page.wait_for_selector("#rq-question")
            page.click("input[type=submit]")
            page.wait_for_selector(".messagelist .success")
            page.click(f"{row} .rq-last a")
            page.wait_for_selector("#rq-job")
            assert page.inner_text("#rq-status") == "queued"

            thread = threading.Thread(
                target=run_worker, args=(["default"],), kwargs={"burst": True}
            )
            thread.start()
            thread.join(60)
            assert not thread.is_alive()
            page.reload()
            assert page.inner_text("#rq-status") == "succeeded"
            page.screenshot(path=str(ARTIFACTS / "schedule-run-now.png"), full_page=True)
        finally:
            context.close()
    assert [e["tag"] for e in read_ledger(ledger)] == ["nightly"]


def fill_chart(client: redis.Redis, queue: str, jobs: Jobs, peak: int) -> None:
    """A last hour of made-up throughput for ``queue``'s chart (the per-minute ring that
    ack.lua and fail.lua count in), so that the overview's screenshot shows one."""
    seconds, _micros = client.time()
    now_minute = int(seconds) // 60
    fields: dict[str, int] = {}
    for minute in range(now_minute - 59, now_minute + 1):
        slot = minute % 60
        wave = (minute * 7919) % 97 / 97
        fields[f"m{slot}"] = minute
        fields[f"s{slot}"] = int(peak * (0.45 + 0.5 * wave))
        fields[f"f{slot}"] = int(peak * 0.06) if minute % 9 == 0 else 0
    client.hset(jobs.keys(queue).throughput, mapping=cast(Any, fields))


@pytest.mark.slow
@pytest.mark.usefixtures("staff_site")
def test_staff_find_jobs_read_failed_jobs_of_all_queues_and_empty_a_queue_in_chromium(
    live_server: Any,
    django_user_model: Any,
    rqueue_redis: redis.Redis,
    tmp_path: Path,
    settings: Any,
):
    from django_rqueue.master.heartbeat import publish
    from django_rqueue.ops.workers import WorkerInfo, WorkerJob

    sync_api = _require_browser()
    jobs = Jobs(rqueue_redis)
    failed = [jobs.failed(message="SMTP down"), jobs.failed(queue="emails", message="timeout")]
    failed += [jobs.failed(queue="emails", message="bounced") for _ in range(2)]
    queued = [jobs.queued(queue="emails", group=f"user:{n % 4}") for n in range(12)]
    scheduled = jobs.scheduled(queue="emails", delay_ms=3_600_000)
    running = jobs.running(queue="low")
    for queue, peak in (("default", 40), ("emails", 80), ("low", 120)):
        fill_chart(rqueue_redis, queue, jobs, peak)
    publish(
        WorkerInfo(
            id="web-1:4242:a1b2c3",
            host="web-1",
            pid=4242,
            queues=("default", "emails", "low"),
            jobs=(WorkerJob(running, "low"),),
            poller=True,
        ),
        ttl=300,
    )
    overview_url = f"{live_server.url}/admin/django_rqueue/dashboard/"

    with sync_api.sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "profile"),
            executable_path=str(CHROMIUM),
            headless=True,
            args=ARGS,
            viewport={"width": 1280, "height": 720},
        )
        try:
            page = context.new_page()
            page.set_default_timeout(15_000)
            page.goto(overview_url)
            page.fill("#id_username", "staff")
            page.fill("#id_password", "s3cret-pass")
            page.click("input[type=submit]")
            page.wait_for_selector("#rq-queues")
            assert page.inner_text("h1") == "Queues and jobs"
            # The breadcrumbs are styled as on Django's own pages: its bar colour, padded.
            crumbs = page.locator(".breadcrumbs")
            assert crumbs.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(38, 75, 93)"
            assert crumbs.evaluate("e => parseFloat(getComputedStyle(e).paddingLeft)") > 0
            text = " ".join(crumbs.inner_text().replace("\u203a", " ").split())
            assert text == "Home Rqueue Queues and jobs"
            assert "No worker" not in page.inner_text("#content-main")
            page.screenshot(path=str(ARTIFACTS / "admin-overview.png"))  # docs/admin-overview.png

            # Find a job: an unknown id leaves a message on the overview; a bare id finds it.
            page.fill("#rq-id", "default:" + "0" * 22)
            page.click("#rq-search input[type=submit]")
            page.wait_for_selector(".messagelist .warning")
            assert "No job has the id default:" in page.inner_text(".messagelist .warning")
            assert page.url == overview_url
            page.fill("#rq-id", failed[1].split(":", 1)[1])
            page.click("#rq-search input[type=submit]")
            page.wait_for_selector("#rq-job")
            assert page.inner_text("#rq-status") == "failed"
            assert page.inner_text("#rq-timeout") == "30 seconds"
            assert "timeout_ms" not in page.inner_text("#rq-job")
            page.screenshot(path=str(ARTIFACTS / "job-failed.png"), full_page=True)

            # The failed jobs of all queues: retry the emails ones in bulk.
            page.goto(overview_url)
            page.click("#rq-failed-all-link")
            page.wait_for_selector("#result_list")
            assert page.inner_text(".paginator") == "4 jobs"
            ticked = "boxes => boxes.map(box => box.checked)"
            page.check("#action-toggle")  # ticks every job of the page, and clears them
            assert page.eval_on_selector_all("input.action-select", ticked) == [True] * 4
            page.uncheck("#action-toggle")
            assert page.eval_on_selector_all("input.action-select", ticked) == [False] * 4
            for job_id in failed[1:]:
                page.check(f"input.action-select[value='{job_id}']")
            page.select_option("select[name=action]", label="Retry selected jobs")
            page.click("#changelist-form button[type=submit]")
            page.wait_for_selector("#rq-question")
            assert page.inner_text("#rq-question") == "Retry these 3 jobs?"
            page.click("input[type=submit]")
            page.wait_for_selector(".messagelist .success")
            assert page.inner_text(".paginator") == "1 job"
            page.screenshot(path=str(ARTIFACTS / "failed-all.png"), full_page=True)
            assert [jobs.state(j, "emails") for j in failed[1:]] == ["queued"] * 3

            # Empty the emails queue: the confirmation says what is kept.
            page.goto(overview_url)
            page.click("#rq-queue-emails a.rq-empty")
            page.wait_for_selector("#rq-question")
            assert page.inner_text("#rq-question") == "Delete the 15 queued jobs of queue emails?"
            assert "1 scheduled job" in page.inner_text("#rq-notes")
            page.screenshot(path=str(ARTIFACTS / "empty-queue-confirm.png"), full_page=True)
            page.click("input[type=submit]")
            page.wait_for_selector(".messagelist .success")
            assert "15 queued jobs deleted" in page.inner_text(".messagelist .success")
            assert page.inner_text("#rq-queue-emails td:nth-child(3)") == "0"
        finally:
            context.close()
    assert [jobs.state(j, "emails") for j in queued] == [None] * 12
    assert jobs.state(scheduled, "emails") == "scheduled"
    assert jobs.state(running, "low") == "running"


@pytest.mark.slow
@pytest.mark.usefixtures("staff_site")
def test_staff_read_a_failed_workflow_retry_its_failed_node_and_a_worker_ends_it_in_chromium(
    live_server: Any,
    django_user_model: Any,
    rqueue_redis: redis.Redis,
    tmp_path: Path,
):
    from django_rqueue.workflows import chord
    from tests.support import workflows as wf
    from tests.workflows.jobs import add, summarize

    sync_api = _require_browser()
    # A chord whose second member failed for good: its body was cancelled, it ended failed.
    plan = wf.create(chord([add.s(1, 1), add.s(2, 2), add.s(3, 3)], summarize.s()))
    first, second, third, body = (n.id for n in plan.nodes)
    wf.succeed(first, "2")
    wf.fail(second)
    wf.succeed(third, "6")
    wf.finish(plan)

    with sync_api.sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "profile"),
            executable_path=str(CHROMIUM),
            headless=True,
            args=ARGS,
            viewport={"width": 1280, "height": 800},
        )
        try:
            page = context.new_page()
            page.set_default_timeout(15_000)
            page.goto(f"{live_server.url}/admin/django_rqueue/dashboard/")
            page.fill("#id_username", "staff")
            page.fill("#id_password", "s3cret-pass")
            page.click("input[type=submit]")
            page.wait_for_selector("#rq-queues")
            page.click("#rq-queue-default td.rq-workflows a")
            page.wait_for_selector("#rq-workflows")
            row = page.locator("#rq-workflows tr.rq-wf-row")
            assert row.locator(".rq-wf-state").inner_text() == "failed"
            assert row.locator(".rq-wf-progress").inner_text() == "4 / 2 / 1 / 1"
            page.screenshot(path=str(ARTIFACTS / "workflows.png"), full_page=True)

            page.click(f"#rq-workflows a:text('{plan.id}')")
            page.wait_for_selector("#rq-wf-graph")
            colour = "e => getComputedStyle(e).borderLeftColor"
            boxes = [page.locator(f"#rq-node-{i}") for i in range(4)]
            # Coloured by state: succeeded green, failed red, the cancelled body grey.
            assert [b.evaluate(colour) for b in boxes] == [
                "rgb(60, 138, 60)",
                "rgb(186, 33, 33)",
                "rgb(60, 138, 60)",
                "rgb(119, 119, 119)",
            ]
            assert "dependency_failed" in boxes[3].inner_text()
            assert page.locator("#rq-wf-map line").count() == 3
            page.screenshot(path=str(ARTIFACTS / "workflow-failed.png"), full_page=True)

            page.click("#rq-action-retry-failed")
            page.wait_for_selector("#rq-question")
            page.click("input[type=submit]")
            page.wait_for_selector(".messagelist .success")
            assert page.inner_text("#rq-wf-state") == "running"
            # The body waits again, for the member that runs again only.
            waits = page.locator("#rq-node-3 .rq-waits").inner_text()
            assert second in waits and first not in waits and third not in waits
            page.screenshot(path=str(ARTIFACTS / "workflow-retried.png"), full_page=True)

            burst_worker()  # runs the member, then the body it releases, then the finisher
            page.reload()
            assert page.inner_text("#rq-wf-state") == "succeeded"
            assert page.inner_text("#rq-wf-result") == "3"
            page.click("#rq-node-3 a.rq-node-id")
            page.wait_for_selector("#rq-job")
            assert page.inner_text("#rq-status") == "succeeded"
            assert plan.id in page.inner_text("#rq-part-of")
            page.screenshot(path=str(ARTIFACTS / "workflow-node.png"), full_page=True)
        finally:
            context.close()


@pytest.mark.slow
@pytest.mark.usefixtures("staff_site")
def test_the_overview_counts_and_a_job_s_progress_refresh_without_a_reload_in_chromium(
    live_server: Any, rqueue_redis: redis.Redis, tmp_path: Path, settings: Any
):
    from django_rqueue import JobContext, get_job
    from tests.support import transitions
    from tests.support.inprocess import keys

    sync_api = _require_browser()
    # The admin's static files and django_rqueue's live.js, under one STATIC_ROOT.
    static = tmp_path / "static"
    static.mkdir()
    (static / "admin").symlink_to(Path(settings.STATIC_ROOT) / "admin")
    (static / "django_rqueue").symlink_to(
        Path(__file__).resolve().parents[2] / "django_rqueue" / "static" / "django_rqueue"
    )
    settings.STATIC_ROOT = str(static)
    jobs = Jobs(rqueue_redis)
    running = get_job(jobs.running())
    assert running is not None
    context = JobContext(job=running, attempt=1)
    context.set_progress(1, 4, "first")

    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch_persistent_context(
            str(tmp_path / "profile"),
            executable_path=str(CHROMIUM),
            headless=True,
            args=ARGS,
            viewport={"width": 1280, "height": 800},
        )
        try:
            page = browser.new_page()
            page.set_default_timeout(15_000)
            page.goto(f"{live_server.url}/admin/django_rqueue/dashboard/")
            page.fill("#id_username", "staff")
            page.fill("#id_password", "s3cret-pass")
            page.click("input[type=submit]")
            page.wait_for_selector("#rq-queues")
            assert page.inner_text("#rq-count-default-queued") == "0"
            page.evaluate("window.rqSamePage = true")  # gone if the page reloads
            jobs.queued()
            jobs.queued()
            page.wait_for_function(
                "document.getElementById('rq-count-default-queued').textContent === '2'"
            )
            assert page.evaluate("window.rqSamePage") is True

            page.goto(f"{live_server.url}/admin/django_rqueue/dashboard/jobs/{running.id}/")
            page.wait_for_selector("#rq-progress")
            assert page.evaluate("document.getElementById('rq-progress').value") == 1
            page.evaluate("window.rqSamePage = true")
            context.set_progress(3, 4, "third")
            page.wait_for_function("document.getElementById('rq-progress').value === 3")
            assert page.inner_text("#rq-progress-text") == "3 / 4 (75%) · third"
            transitions.ack(rqueue_redis, keys(), running.id, running.token, "null", 60)
            page.wait_for_function(
                "document.getElementById('rq-status').textContent === 'succeeded'"
            )
            assert "reload" in page.inner_text("#rq-live-note")
            assert page.evaluate("window.rqSamePage") is True
            page.screenshot(path=str(ARTIFACTS / "job-progress.png"), full_page=True)
        finally:
            browser.close()
