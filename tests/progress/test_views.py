"""``django_rqueue.views.job_status``: the JSON shape, permissions, 404, sensitive data hidden."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from django.contrib.auth.models import Permission
from django.test import Client

from django_rqueue import JobContext, get_job
from django_rqueue.job import Job
from tests.jobs_app.jobs import log_in
from tests.support import transitions
from tests.support.inprocess import keys
from tests.support.jobs_in_state import Jobs

pytestmark = pytest.mark.urls("tests.progress.urls")


@pytest.fixture
def user_client(django_user_model: Any, db: None) -> Any:
    """``user_client(username, *codenames)``: a logged-in client of a new non-staff user."""

    def make(username: str, *codenames: str) -> Client:
        user = django_user_model.objects.create_user(username, password="pw")
        for codename in codenames:
            user.user_permissions.add(
                Permission.objects.get(content_type__app_label="django_rqueue", codename=codename)
            )
        client = Client()
        client.force_login(user)
        return client

    return make


def running(job_id: str) -> Job[object]:
    job = get_job(job_id)
    assert job is not None
    return job


def test_a_running_job_reports_status_progress_and_metadata(jobs: Jobs, user_client: Any) -> None:
    job = running(jobs.running())
    context = JobContext(job=job, attempt=1)
    context.set_progress(2, 8, "resizing")
    context.metadata.update({"user": "ann", "pages": [1, 2]})
    context.save_metadata()
    response = user_client("viewer", "view_job").get(f"/jobs/{job.id}/status/")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    body = response.json()
    assert set(body) == {
        "id", "name", "queue", "status", "attempts", "max_attempts", "enqueued_at",
        "started_at", "finished_at", "progress", "metadata", "result", "error",
    }  # fmt: skip
    assert (body["id"], body["status"], body["attempts"]) == (job.id, "running", 1)
    assert body["progress"]["current"] == 2 and body["progress"]["total"] == 8
    assert body["progress"]["fraction"] == 0.25 and body["progress"]["message"] == "resizing"
    assert body["progress"]["updated_at"].endswith("+00:00")
    assert body["metadata"] == {"user": "ann", "pages": [1, 2]}
    assert (body["result"], body["error"], body["finished_at"]) == (None, None, None)
    assert "args" not in body and "kwargs" not in body


def test_a_finished_job_reports_its_result_or_error_without_traceback(
    jobs: Jobs, user_client: Any
) -> None:
    client = user_client("viewer", "view_job")
    done = client.get(f"/jobs/{jobs.succeeded()}/status/").json()
    assert (done["status"], done["result"], done["progress"]) == ("succeeded", {"ok": 1}, None)
    failed = client.get(f"/jobs/{jobs.failed(message='disk full')}/status/").json()
    assert failed["status"] == "failed" and failed["result"] is None
    assert failed["error"] == {"type": "builtins.ValueError", "message": "disk full"}


def test_without_the_view_permission_it_is_403(
    jobs: Jobs, user_client: Any, client: Client
) -> None:
    job_id = jobs.running()
    assert user_client("nobody").get(f"/jobs/{job_id}/status/").status_code == 403
    assert client.get(f"/jobs/{job_id}/status/").status_code == 403  # anonymous
    assert user_client("changer", "change_job").get(f"/jobs/{job_id}/status/").status_code == 200


def test_unknown_ids_are_404(user_client: Any) -> None:
    client = user_client("viewer", "view_job")
    for job_id in ("default:AAAAAAAAAAAAAAAAAAAAAA", "nosuchqueue:AAAAAAAAAAAAAAAAAAAAAA", "x"):
        assert client.get(f"/jobs/{job_id}/status/").status_code == 404


def test_only_get_is_allowed(jobs: Jobs, user_client: Any) -> None:
    response = user_client("viewer", "view_job").post(f"/jobs/{jobs.running()}/status/")
    assert response.status_code == 405


def test_a_site_permission_hook_decides_per_job(jobs: Jobs, user_client: Any) -> None:
    job = running(jobs.running())
    context = JobContext(job=job, attempt=1)
    context.metadata["user"] = "ann"
    context.save_metadata()
    assert user_client("ann").get(f"/mine/{job.id}/status/").status_code == 200
    assert user_client("bob", "view_job").get(f"/mine/{job.id}/status/").status_code == 403


def test_a_job_with_sensitive_arguments_shows_no_arguments_and_no_metadata(
    rqueue_redis: redis.Redis, user_client: Any
) -> None:
    queued = log_in.using(on_commit=False).delay("/dev/null", "ann", "hunter2")
    reserved = transitions.reserve(rqueue_redis, keys(queued.queue), lease_ms=60_000, worker_id="w")
    assert reserved is not None, queued
    job = running(queued.id)
    context = JobContext(job=job, attempt=1)
    context.metadata["typed"] = "hunter2"
    context.save_metadata()
    response = user_client("viewer", "view_job").get(f"/jobs/{job.id}/status/")
    assert response.status_code == 200
    assert b"hunter2" not in response.content
    assert response.json()["metadata"] is None
