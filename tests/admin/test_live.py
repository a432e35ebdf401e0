"""The admin shows a job's progress and metadata, and the JSON its pages poll to refresh
(``admin/live.py``, ``static/django_rqueue/live.js``): shape, permissions, no inline script."""

from __future__ import annotations

import re

from django.test import Client

from django_rqueue import JobContext, get_job
from tests.support.jobs_in_state import Jobs

from .conftest import BASE, MakeClient
from .test_pages import job_url


def report(job_id: str, current: float, total: float | None, message: str = "") -> None:
    job = get_job(job_id)
    assert job is not None
    context = JobContext(job=job, attempt=1)
    context.set_progress(current, total, message)
    context.metadata["rows"] = 120
    context.save_metadata()


def inline_scripts(html: str) -> list[str]:
    return [tag for tag in re.findall(r"<script\b[^>]*>", html) if "src=" not in tag]


def test_a_running_job_page_shows_its_progress_bar_metadata_and_polls(
    admin_client_rq: Client, jobs: Jobs
) -> None:
    job_id = jobs.running()
    report(job_id, 30, 120, "importing <rows>")
    response = admin_client_rq.get(job_url(job_id))
    html = response.content.decode()
    assert '<progress id="rq-progress" max="120" value="30">' in html
    assert response.context["progress"] == "30 / 120 (25%) · importing <rows>"
    assert "importing &lt;rows&gt;" in html  # escaped
    assert response.context["metadata"] == '{\n  "rows": 120\n}'
    live = f'data-url="{BASE}live/jobs/{job_url(job_id).split("/")[-2]}/"'
    assert live in html and 'data-interval="2000"' in html
    assert re.search(r'<script src="[^"]*django_rqueue/live\.js" defer>', html)
    assert inline_scripts(html) == []


def test_progress_without_total_is_an_indeterminate_bar(
    admin_client_rq: Client, jobs: Jobs
) -> None:
    job_id = jobs.running()
    report(job_id, 7, None, "pages")
    html = admin_client_rq.get(job_url(job_id)).content.decode()
    assert '<progress id="rq-progress" max="1">' in html
    assert '<span id="rq-progress-text">7 · pages</span>' in html


def test_a_finished_job_page_does_not_poll_and_a_plain_one_shows_no_progress(
    admin_client_rq: Client, jobs: Jobs
) -> None:
    html = admin_client_rq.get(job_url(jobs.succeeded())).content.decode()
    assert "rq-live" not in html and "live.js" not in html and "rq-progress" not in html
    assert "Metadata" not in html


def test_the_job_json_has_status_progress_and_metadata(admin_client_rq: Client, jobs: Jobs) -> None:
    job_id = jobs.running()
    page = admin_client_rq.get(job_url(job_id)).content.decode()
    live_url = re.search(r'data-url="([^"]+)"', page).group(1)  # type: ignore[union-attr]
    before = admin_client_rq.get(live_url).json()
    assert before["bars"] == {"rq-progress": {"value": None, "max": 1}}
    assert before["text"]["rq-progress-text"] == "–" and before["final"] is False
    report(job_id, 1, 4)
    after = admin_client_rq.get(live_url).json()
    assert after["text"]["rq-status"] == "running"
    assert after["text"]["rq-attempts"] == "1 / 1"
    assert after["text"]["rq-progress-text"] == "1 / 4 (25%)"
    assert after["text"]["rq-metadata"] == '{\n  "rows": 120\n}'
    assert after["bars"] == {"rq-progress": {"value": 1, "max": 4}}


def test_the_job_json_says_final_once_the_job_ended(admin_client_rq: Client, jobs: Jobs) -> None:
    reply = admin_client_rq.get(f"{BASE}live/jobs/{jobs.failed()}/").json()
    assert reply["final"] is True and reply["text"]["rq-status"] == "failed"
    assert "reload" in reply["text"]["rq-live-note"]


def test_the_counts_json_has_each_queue_s_counts_under_the_overview_s_ids(
    admin_client_rq: Client, jobs: Jobs
) -> None:
    jobs.queued()
    jobs.queued()
    jobs.running()
    overview = admin_client_rq.get(BASE).content.decode()
    assert re.search(r'<script src="[^"]*django_rqueue/live\.js" defer>', overview)
    assert inline_scripts(overview) == []
    reply = admin_client_rq.get(f"{BASE}live/counts/").json()
    assert reply["final"] is False
    for name, count in (("queued", "2"), ("running", "1"), ("failed", "0")):
        element = f"rq-count-default-{name}"
        assert reply["text"][element] == count
        assert re.search(rf'id="{element}">{count}</a>', overview)


def test_the_json_is_checked_as_the_pages_are(make_client: MakeClient, jobs: Jobs) -> None:
    job_id = jobs.running()
    nobody = make_client()
    assert nobody.get(f"{BASE}live/counts/").status_code == 403
    assert nobody.get(f"{BASE}live/jobs/{job_id}/").status_code == 403
    viewer = make_client("view_job")
    assert viewer.get(f"{BASE}live/counts/").status_code == 200
    assert viewer.get(f"{BASE}live/jobs/{job_id}/").status_code == 200
    assert viewer.get(f"{BASE}live/jobs/default:AAAAAAAAAAAAAAAAAAAAAA/").status_code == 404
    anonymous = Client()
    assert anonymous.get(f"{BASE}live/counts/").status_code == 302  # to the login page
