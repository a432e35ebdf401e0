"""Django views a site wires into its own URLs: :func:`job_status`, a job's status as JSON."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.exceptions import PermissionDenied
from django.core.serializers.json import DjangoJSONEncoder
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET

from .job import Job, JobStatus, get_job

#: Decides whether ``request`` may see ``job`` (:func:`job_status`'s ``permission``).
type Permission = Callable[[HttpRequest, Job[Any]], bool]


def view_job_permission(request: HttpRequest, job: Job[Any]) -> bool:
    """The default :func:`job_status` permission: the user has ``django_rqueue.view_job``
    (the permission of the admin's queue pages), or ``change_job``."""
    user = request.user
    return user.has_perm("django_rqueue.view_job") or user.has_perm("django_rqueue.change_job")


class _Encoder(DjangoJSONEncoder):
    """Django's encoder (dates, decimals, UUIDs), and ``str()`` of anything else a job's
    result may hold (its own serializer carries more types than JSON)."""

    def default(self, o: Any) -> Any:
        try:
            return super().default(o)
        except TypeError:
            return str(o)


def status_of(job: Job[Any]) -> dict[str, Any]:
    """:func:`job_status`'s reply for ``job``: a dict, JSON-ready with Django's encoder.

    ``{"id", "name", "queue", "status", "attempts", "max_attempts", "enqueued_at",
    "started_at", "finished_at", "progress", "metadata", "result", "error"}``: times ISO
    8601 UTC or ``None``; ``progress`` ``None`` or ``{"current", "total", "message",
    "fraction", "updated_at"}`` (:meth:`.Progress.as_dict`); ``metadata`` the job's dict,
    ``None`` for a job with sensitive arguments (``@job(sensitive=...)``); ``result`` the
    return value once ``succeeded`` (else ``None``); ``error`` ``{"type", "message"}`` of
    the latest failed attempt, without its traceback (else ``None``). The job's arguments
    are never included.
    """
    done = job.status is JobStatus.SUCCEEDED
    return {
        "id": job.id,
        "name": job.name,
        "queue": job.queue,
        "status": job.status.value,
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "enqueued_at": job.enqueued_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
        "progress": job.progress.as_dict() if job.progress else None,
        "metadata": None if job.sensitive is not None else job.metadata,
        "result": job.result if done else None,
        "error": {"type": job.error["type"], "message": job.error["message"]}
        if job.error
        else None,
    }


@require_GET
def job_status(
    request: HttpRequest, job_id: str, permission: Permission = view_job_permission
) -> HttpResponse:
    """``GET``: the job ``job_id``'s status as JSON (:func:`status_of`), for a page that
    polls it (a progress bar). Wire it into the site's URLs; ``permission`` (the extra
    keyword dict of ``path()``) replaces the default check (:func:`view_job_permission`)
    with any ``(request, job) -> bool``, for instance "the user who started it".

    Responses: 200 with the JSON; 404 for an unknown id (or one of a queue no longer
    declared); 403 when ``permission`` refuses; 405 for another method than
    ``GET``/``HEAD``. Job ids are random (22 URL-safe characters), so telling 404 from 403
    reveals nothing guessable.

    Raises:
        RedisUnavailable: Redis cannot be reached (Django turns it into a 500 unless the
            site handles it).
    """
    job = get_job(job_id)
    if job is None:
        raise Http404("No job with this id.")
    if not permission(request, job):
        raise PermissionDenied
    return JsonResponse(status_of(job), encoder=_Encoder)
