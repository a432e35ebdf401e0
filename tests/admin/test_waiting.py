"""Waiting jobs in the admin (issue 26): their list, their page, and their cancel and delete
(cancel.lua takes the id out of the queue's ``waiting`` zset), on the Redis state the
transition scripts write."""

from __future__ import annotations

import pytest
from django.contrib.admin.utils import quote as admin_quote
from django.test import Client

from django_rqueue import JobStatus, get_job
from django_rqueue.engine.connection import redis_time_ms
from django_rqueue.engine.fields import JobFields, StatsFields
from tests.ops import dependents
from tests.support.jobs_in_state import Jobs

from .conftest import BASE


def job_url(job_id: str, action: str = "") -> str:
    path = f"{BASE}jobs/{admin_quote(job_id)}/"
    return f"{path}{action}/" if action else path


def test_the_waiting_list_shows_deadline_inputs_and_workflow(
    admin_client_rq: Client, jobs: Jobs
) -> None:
    now = redis_time_ms(jobs.client)
    sooner = dependents.waiting(jobs, deadline_ms=now + 60_000, missing=1)
    never = dependents.waiting(jobs, deadline_ms=float("inf"))
    jobs.client.hset(jobs.keys().job(never), JobFields.WORKFLOW, "default:the-workflow")

    response = admin_client_rq.get(f"{BASE}queues/default/waiting/")

    assert response.status_code == 200
    assert response.context["title"].startswith("Waiting jobs")
    rows = response.context["rows"]
    assert [r["id"] for r in rows] == [sooner, never]
    assert rows[0]["cells"][1:] == ["1/2", ""]
    assert rows[1]["cells"][:2] == ["none", "0/2"]
    link = f'<a href="{BASE}workflows/default_3Athe-workflow/">default:the-workflow</a>'
    assert rows[1]["cells"][2] == link and link in response.text
    assert ("waiting", f"{BASE}queues/default/waiting/") in response.context["states"]


@pytest.mark.parametrize("action", ["cancel", "delete"])
def test_a_waiting_job_is_cancelled_or_deleted_by_its_url(
    admin_client_rq: Client, jobs: Jobs, action: str
) -> None:
    job_id = dependents.waiting(jobs)

    shown = admin_client_rq.get(job_url(job_id, action))
    posted = admin_client_rq.post(job_url(job_id, action), follow=True)

    assert shown.status_code == 200 and "Are you sure?" in shown.text
    assert posted.status_code == 200 and "waits for its inputs" not in posted.text
    job = get_job(job_id)
    if action == "cancel":
        assert job is not None and job.status is JobStatus.CANCELLED
    else:
        assert job is None
    assert jobs.client.zscore(jobs.keys().waiting, job_id) is None


def test_cancel_and_delete_are_offered_for_a_waiting_job(
    admin_client_rq: Client, jobs: Jobs
) -> None:
    job_id = dependents.waiting(jobs)

    listing = admin_client_rq.get(f"{BASE}queues/default/waiting/")
    page = admin_client_rq.get(job_url(job_id))
    confirm = admin_client_rq.get(job_url(job_id, "delete"))

    assert [a for a, _label in listing.context["bulk_actions"]] == ["cancel", "delete"]
    assert [a[0] for a in page.context["actions"]] == ["cancel", "delete"]
    assert confirm.status_code == 200 and "Are you sure?" in confirm.text


def test_the_overview_shows_waiting_jobs_and_running_workflows(
    admin_client_rq: Client, jobs: Jobs
) -> None:
    dependents.waiting(jobs)
    dependents.waiting(jobs)
    dependents.count(jobs.client, jobs, StatsFields.WORKFLOWS_STARTED, 3)
    dependents.count(jobs.client, jobs, StatsFields.WORKFLOWS_FAILED)

    response = admin_client_rq.get(BASE)

    cards = {c.counts.queue: c for c in response.context["cards"]}
    assert (cards["default"].counts.waiting, cards["default"].counts.workflows_running) == (2, 2)
    assert (cards["emails"].counts.waiting, cards["emails"].counts.workflows_running) == (0, 0)
    waiting = (
        f'<td class="rq-waiting"><a href="{BASE}queues/default/waiting/" '
        'id="rq-count-default-waiting">2</a></td>'
    )
    assert waiting in response.text
    workflows = (
        f'<td class="rq-workflows"><a href="{BASE}queues/default/workflows/" '
        'id="rq-count-default-workflows_running">2</a></td>'
    )
    assert response.text.count(workflows) == 1
