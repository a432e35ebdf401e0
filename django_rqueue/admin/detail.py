"""The page of one job: everything its record holds, even when part of it is corrupt."""

from __future__ import annotations

import datetime
import json
from typing import Any

import redis
from django.contrib.admin.utils import quote
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from ..conf import get_config
from ..display import hidden, shown_arguments
from ..engine.connection import as_text, ms_to_datetime, wrong_type
from ..engine.fields import JobFields
from ..engine.keys import queue_of
from ..job import CancelReason, Job, JobStatus
from ..ops import workflow_listings
from ..ops.listings import STATES
from ..ops.operations import JobAction
from ..sensitive import MASK
from . import live, membership
from .common import JOB_ACTIONS, RqueueAdmin, allowed, context, job_id_in_url, job_url, url
from .lists import duration, list_title


def seconds(value: float) -> str:
    """``value`` seconds as people write them: "300 seconds", "1.5 seconds"."""
    return ngettext("%(n)s second", "%(n)s seconds", 1 if value == 1 else 2) % {"n": f"{value:g}"}


def options(job: Job[Any], now: datetime.datetime) -> list[tuple[str, str, str]]:
    """The job's settings and timing as ``(label, value, html id)`` rows, in people's units.

    The fencing token is left out: it is the attempt number, shown as "Attempts".
    """
    rows = [
        (_("Time limit per attempt"), seconds(job.timeout), "rq-timeout"),
        (_("Kept after it ends"), duration(job.result_ttl), "rq-result-ttl"),
    ]
    if job.unique_key:
        rows.append((_("Unique key"), job.unique_key, "rq-unique-key"))
    if job.worker:
        label = _("Worker") if job.status is JobStatus.RUNNING else _("Last worker")
        rows.append((label, job.worker, "rq-worker"))
    if job.started_at is not None:
        if job.status is JobStatus.RUNNING:
            rows.append((_("Running for"), seconds(_round(now - job.started_at)), "rq-duration"))
        elif job.finished_at is not None and job.finished_at >= job.started_at:
            rows.append(
                (
                    _("Duration of the last attempt"),
                    seconds(_round(job.finished_at - job.started_at)),
                    "rq-duration",
                )
            )
    return rows


def attempt_errors(job: Job[Any], raw: dict[str, str]) -> list[dict[str, Any]]:
    """The failed attempts' errors, each with ``at`` (when it failed) where that is known:
    the time recorded with it, or for the final failure of a failed job recorded before
    those times were kept, when the job failed."""
    errors: list[dict[str, Any]] = [dict(e) for e in job.errors]
    for n, error in enumerate(errors, 1):
        at = ms_to_datetime(raw.get(JobFields.error_time_part(n)))
        if at is not None:
            error["at"] = at
    if errors and "at" not in errors[-1]:
        if job.status is JobStatus.FAILED and job.finished_at is not None:
            errors[-1]["at"] = job.finished_at
    return errors


def _round(delta: datetime.timedelta) -> float:
    return round(delta.total_seconds(), 3)


#: How the job page words :attr:`Job.cancel_reason`.
CANCEL_REASONS = {
    CancelReason.EXPIRED: gettext_lazy("expired: not started before its expiry"),
}


def load(job_id: str) -> tuple[Job[Any], dict[str, str]]:
    """Return the job and its raw hash (as text), or raise 404."""
    queue = queue_of(job_id)
    if queue is None or queue not in get_config().queues:
        raise Http404(_("No job with this id."))
    try:
        # Bounded: a job with many inputs is read without its arrivals past the ones shown.
        raw = workflow_listings.read_job(job_id, membership.SHOWN)
    except redis.ResponseError as exc:
        if not wrong_type(exc):
            raise
        return Job.unreadable(job_id, str(exc)), {}
    if not raw:
        raise Http404(_("No job with this id: it finished and expired, or was deleted."))
    text = {as_text(k): as_text(v) for k, v in raw.items()}
    return Job.from_fields(job_id, raw), text


def shown_raw(job: Job[Any], raw: dict[str, str]) -> list[tuple[str, str]]:
    """The raw hash of a job whose record has problems, sorted, as people may see it: the
    payload's fields hidden when the job has sensitive arguments (``@job(sensitive=...)``)."""
    if hidden(job) is None:
        return sorted(raw.items())
    payload = JobFields.PAYLOAD
    return sorted(
        (name, MASK if name == payload or name.startswith(f"{payload}:") else value)
        for name, value in raw.items()
    )


def pretty(value: Any) -> str:  # any JSON value
    return json.dumps(value, indent=2, sort_keys=True, default=str, ensure_ascii=False)


def job_detail(request: HttpRequest, model_admin: RqueueAdmin, job_id: str) -> HttpResponse:
    """Show one job (404 when it does not exist)."""
    job_id = job_id_in_url(job_id)
    job, raw = load(job_id)
    args, kwargs = shown_arguments(job)
    list_url = (
        url(model_admin, "django_rqueue_job_list", job.queue, job.status.value)
        if job.status.value in STATES
        else ""
    )
    crumbs = [(job.queue, "")]
    if list_url:
        crumbs.append((str(list_title(job.status.value)), list_url))
    crumbs.append((job_id, ""))
    actions = [
        (action.value, JOB_ACTIONS[action].label, job_url(model_admin, job_id, action))
        for action in JobAction
        if job.status in action.states and allowed(request, model_admin, action)
    ]
    return TemplateResponse(
        request,
        "admin/django_rqueue/job_detail.html",
        context(
            request,
            model_admin,
            _("Job %(id)s") % {"id": job_id},
            crumbs=crumbs,
            job=job,
            queue=job.queue,
            state=job.status.value,
            list_url=list_url,
            args=pretty(args),
            kwargs=pretty(kwargs),
            headers=sorted(job.headers.items()),
            result=pretty(job.result) if JobFields.RESULT in raw else None,
            options=options(job, timezone.now()),
            raw=shown_raw(job, raw) if job.problems else None,
            errors=list(enumerate(attempt_errors(job, raw), 1)),
            actions=actions,
            cancel_reason=CANCEL_REASONS.get(job.cancel_reason, "") if job.cancel_reason else "",
            links=membership.links(model_admin, job),
            progress=live.progress_text(job.progress),
            progress_bar=live.progress_bar(job.progress),
            metadata=live.pretty(job.metadata) if job.metadata else "",
            live=None
            if job.status in live.FINAL
            else live.live_element(model_admin, "django_rqueue_live_job", quote(job_id)),
        ),
    )
