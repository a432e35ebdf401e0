"""The admin's live refresh: the small JSON the overview and job pages poll, without a reload.

``django_rqueue/static/django_rqueue/live.js`` (loaded with a plain ``<script src>``, no
inline script, so a content security policy without ``'unsafe-inline'`` allows it) finds
the element ``#rq-live`` of a page, polls its ``data-url`` every ``data-interval`` ms while
the page is visible, and applies the reply: ``{"text": {element id: text}, "bars":
{element id: {"value": number | null, "max": number}}, "final": bool}`` (``value``
``null``: an indeterminate bar). It stops once ``final`` is true (the job ended) or a poll
fails. Without JavaScript the pages are complete, as rendered.
"""

from __future__ import annotations

import json
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.utils.translation import gettext as _

from ..conf import get_config
from ..exceptions import RedisUnavailable
from ..job import Job, JobStatus, get_job
from ..ops import counts
from ..progress import Progress
from .common import RqueueAdmin, job_id_in_url, url

#: How often the pages poll, in milliseconds.
INTERVAL_MS = 2000
#: The counts of each queue the overview refreshes (``rq-count-<queue>-<name>``).
COUNTS = ("waiting", "queued", "scheduled", "running", "failed", "workflows_running")
#: The states a job leaves no more: its page stops polling.
FINAL = frozenset({JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED})


def progress_text(progress: Progress | None) -> str:
    """A job's progress as people read it (``str()`` of its :class:`.Progress`); ``"–"``
    for none."""
    return "–" if progress is None else str(progress)


def progress_bar(progress: Progress | None) -> dict[str, Any]:
    """The ``<progress>`` element's ``value`` and ``max`` (``value`` ``None``: indeterminate)."""
    if progress is None or progress.total is None:
        return {"value": None, "max": 1}
    return {"value": min(progress.current, progress.total), "max": progress.total}


def pretty(value: Any) -> str:  # any JSON value
    return json.dumps(value, indent=2, sort_keys=True, default=str, ensure_ascii=False)


def live_counts(request: HttpRequest, model_admin: RqueueAdmin) -> HttpResponse:
    """The overview's counts, one ``rq-count-<queue>-<name>`` per queue and count
    (:data:`COUNTS`); a queue whose Redis cannot be read is left out."""
    text: dict[str, str] = {}
    for queue in get_config().queues:
        try:
            found = counts.queue_counts(queue)
        except RedisUnavailable:
            continue
        for name in COUNTS:
            text[f"rq-count-{queue}-{name}"] = str(getattr(found, name))
    return JsonResponse({"text": text, "bars": {}, "final": False})


def live_job(request: HttpRequest, model_admin: RqueueAdmin, job_id: str) -> HttpResponse:
    """A job page's status, progress and metadata (404 when the job does not exist)."""
    job = get_job(job_id_in_url(job_id))
    if job is None:
        raise Http404(_("No job with this id."))
    return JsonResponse(job_reply(job))


def job_reply(job: Job[Any]) -> dict[str, Any]:
    """What :func:`live_job` answers for ``job``."""
    final = job.status in FINAL
    text = {
        "rq-status": job.status.value,
        "rq-attempts": f"{job.attempts} / {job.max_attempts}",
        "rq-progress-text": progress_text(job.progress),
        "rq-metadata": pretty(job.metadata),
    }
    if final:
        text["rq-live-note"] = _("The job ended: reload the page to see its outcome.")
    return {"text": text, "bars": {"rq-progress": progress_bar(job.progress)}, "final": final}


def live_element(model_admin: RqueueAdmin, name: str, *args: str) -> dict[str, Any]:
    """The template context of the ``#rq-live`` element: the URL it polls, the interval."""
    return {"url": url(model_admin, name, *args), "interval": INTERVAL_MS}
