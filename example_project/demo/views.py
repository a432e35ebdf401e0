"""Views of the demo: the password-reset form and a JSON job status."""

import datetime
from typing import Any

from django.core import signing
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from django_rqueue import Job, RedisUnavailable, get_job

from .forms import PasswordResetRequestForm
from .jobs import RESET_MAX_AGE, RESET_SALT, check_page, send_reset_email


@require_http_methods(["GET", "POST"])
def password_reset(request: HttpRequest) -> HttpResponse:
    """GET: the form. POST: queue the reset email and answer at once."""
    form = PasswordResetRequestForm(request.POST if request.method == "POST" else None)
    if form.is_valid():
        site_url = request.build_absolute_uri("/")
        try:
            job = send_reset_email.delay(form.cleaned_data["email"], site_url)
        except RedisUnavailable:
            form.add_error(None, "The email could not be queued right now; please try again.")
            return render(request, "demo/password_reset.html", {"form": form}, status=503)
        return render(request, "demo/reset_sent.html", {"job": job})
    return render(request, "demo/password_reset.html", {"form": form})


@require_GET
def password_reset_confirm(request: HttpRequest, token: str) -> HttpResponse:
    """The page a reset link opens (the demo stops at checking the token)."""
    try:
        email = signing.loads(token, salt=RESET_SALT, max_age=RESET_MAX_AGE)
    except signing.BadSignature:
        return render(request, "demo/reset_confirm.html", {"email": None}, status=400)
    return render(request, "demo/reset_confirm.html", {"email": email})


def _iso(value: datetime.datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def job_as_dict(job: Job[Any]) -> dict[str, Any]:
    """The JSON the status view returns (tracebacks left out)."""
    return {
        "id": job.id,
        "name": job.name,
        "queue": job.queue,
        "status": str(job.status),
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "enqueued_at": _iso(job.enqueued_at),
        "started_at": _iso(job.started_at),
        "finished_at": _iso(job.finished_at),
        "result": job.result,
        "errors": [{"type": e["type"], "message": e["message"]} for e in job.errors],
    }


@require_GET
def job_status(request: HttpRequest, job_id: str) -> JsonResponse:
    """``/jobs/<id>/``: where a job is, as JSON (404 for an unknown id)."""
    job = get_job(job_id)
    if job is None:
        return JsonResponse({"error": f"no job {job_id!r}"}, status=404)
    return JsonResponse(job_as_dict(job))


async def check_site(request: HttpRequest) -> JsonResponse:
    """An async view: queue a check of the reset page with ``adelay()`` (the asyncio
    Redis client: the event loop is not blocked) and answer the job's id."""
    job = await check_page.adelay(request.build_absolute_uri(reverse("password_reset")))
    return JsonResponse({"id": job.id, "status": str(job.status)})
