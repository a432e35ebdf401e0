"""The overview page: per-queue counts, throughput chart, workers, warnings."""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass, field
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.utils.text import capfirst
from django.utils.translation import gettext as _

from ..conf import get_config
from ..engine.connection import ms_to_datetime
from ..engine.keys import queue_of
from ..exceptions import RedisUnavailable
from ..ops import alerts, counts, listings
from ..ops.workers import WorkerInfo, list_workers
from . import live
from .common import RqueueAdmin, context, job_url, url

#: Chart geometry (SVG user units): bar width, gap, height.
BAR, GAP, HEIGHT = 4, 1, 40


@dataclass
class QueueCard:
    """One queue on the overview page: its counts, the last hour's throughput, its links."""

    counts: counts.QueueCounts
    bars: list[dict[str, Any]] = field(default_factory=list)
    succeeded_hour: int = 0
    failed_hour: int = 0
    peak: int = 0
    #: State -> URL of its listing.
    links: dict[str, str] = field(default_factory=dict)
    #: Where the Pause (or, when paused, Resume) button posts.
    toggle_url: str = ""
    #: The confirmation page of "empty this queue".
    empty_url: str = ""
    #: The queue's ``rate_limit`` as configured (``"100/s"``), ``""`` when unlimited.
    rate_limit: str = ""


def chart(rows: list[tuple[datetime.datetime, int, int]]) -> tuple[list[dict[str, Any]], int]:
    """Stacked bars (succeeded below, failed above) for an inline SVG, and the peak."""
    peak = max((s + f for _, s, f in rows), default=0)
    bars = []
    for n, (minute, s, f) in enumerate(rows):
        hs = round(HEIGHT * s / peak) if peak else 0
        hf = round(HEIGHT * f / peak) if peak else 0
        bars.append(
            {
                "x": n * (BAR + GAP),
                "s_y": HEIGHT - hs,
                "s_h": hs,
                "f_y": HEIGHT - hs - hf,
                "f_h": hf,
                "title": f"{minute:%H:%M} UTC: {s} succeeded, {f} failed",
            }
        )
    return bars, peak


def overview(request: HttpRequest, model_admin: RqueueAdmin) -> HttpResponse:
    """Counts per queue, per-minute throughput over the last hour, live workers."""
    search = request.GET.get("id", "").strip()
    if search:
        return find_job(request, model_admin, search)
    cards = []
    for queue in get_config().queues:
        try:
            card = QueueCard(counts.queue_counts(queue))
            rows = counts.throughput(queue)
        except RedisUnavailable as exc:
            cards.append(QueueCard(counts.QueueCounts(queue, error=str(exc))))
            continue
        card.bars, card.peak = chart(rows)
        card.succeeded_hour = sum(s for _, s, _f in rows)
        card.failed_hour = sum(f for _, _s, f in rows)
        cards.append(card)
    found = alerts.queue_warnings(c.counts for c in cards)
    workers_error = ""
    try:
        workers = list_workers()
    except RedisUnavailable as exc:
        workers, workers_error = [], str(exc)  # unknown: no warning about them
    else:
        found += alerts.worker_warnings(workers)
    for card in cards:
        card_links(model_admin, card)
        limit = get_config().queue(card.counts.queue).rate_limit
        card.rate_limit = "" if limit is None else str(limit)
    return TemplateResponse(
        request,
        "admin/django_rqueue/overview.html",
        context(
            request,
            model_admin,
            capfirst(str(model_admin.model._meta.verbose_name_plural)),
            cards=cards,
            workers=[_worker_row(w) for w in workers],
            workers_error=workers_error,
            warnings=[warning_text(w) for w in found],
            chart_width=60 * (BAR + GAP),
            bar_width=BAR,
            chart_height=HEIGHT,
            schedules_url=url(model_admin, "django_rqueue_schedules"),
            failed_all_url=url(model_admin, "django_rqueue_failed_all"),
            schedule_count=len(get_config().schedule),
            live=live.live_element(model_admin, "django_rqueue_live_counts"),
        ),
    )


#: The random part of a job id: 22 URL-safe base64 characters (``keys.new_job_id``).
_BARE_ID = re.compile(r"[A-Za-z0-9_-]{22}")


def find_job(request: HttpRequest, model_admin: RqueueAdmin, text: str) -> HttpResponse:
    """Go to the job whose id is ``text``; else back to the overview with a message.

    An id without its queue (the 22 characters after ``<queue>:``) is looked up in
    each declared queue (one ``EXISTS`` per queue).
    """
    queue = queue_of(text)
    if queue is None and _BARE_ID.fullmatch(text):
        candidates = [f"{q}:{text}" for q in get_config().queues]
    elif queue is not None and queue in get_config().queues:
        candidates = [text]
    else:
        messages.warning(
            request,
            _(
                "%(id)s is not a job id. A job id is its queue's name, a colon and 22"
                " characters, as in %(example)s."
            )
            % {"id": text, "example": f"{next(iter(get_config().queues))}:Yk3qUf0x9bT2mZ8wLp4rNa"},
        )
        return redirect(url(model_admin, "django_rqueue_dashboard_changelist"))
    errors = []
    for candidate in candidates:
        try:
            if listings.job_exists(candidate):
                return redirect(job_url(model_admin, candidate))
        except RedisUnavailable as exc:
            errors.append(str(exc))
    for error in errors:
        messages.error(request, error)
    messages.warning(
        request,
        _("No job has the id %(id)s: it may have finished and expired, or been deleted.")
        % {"id": text},
    )
    return redirect(url(model_admin, "django_rqueue_dashboard_changelist"))


def warning_text(warning: alerts.QueueWarning) -> str:
    """The overview's words for a warning of :mod:`django_rqueue.ops.alerts`."""
    match warning.kind:
        case alerts.WarningKind.OVERDUE:
            return _(
                "Queue %(queue)s has scheduled jobs overdue by %(late)s s: no poller has"
                " promoted them. Is a worker (without --without-poller) or rqueue_poller"
                " running?"
            ) % {"queue": warning.queue, "late": warning.late}
        case alerts.WarningKind.NO_WORKER:
            return _("No worker has been seen recently: start one with manage.py rqueue_work.")
        case alerts.WarningKind.NO_POLLER:
            return _(
                "No worker runs a poller (all use --without-poller): unless rqueue_poller runs,"
                " scheduled jobs and retries are never queued."
            )
        case alerts.WarningKind.CORRUPT_WORKER:
            return _(
                "The registry entry of worker %(worker)s is corrupt (%(detail)s): what it"
                " shows may be wrong. A live worker rewrites it at its next heartbeat."
            ) % {"worker": warning.worker, "detail": warning.detail}


def card_links(model_admin: RqueueAdmin, card: QueueCard) -> None:
    queue = card.counts.queue
    card.links = {
        state: url(model_admin, "django_rqueue_job_list", queue, state) for state in listings.STATES
    }
    card.links["workflows"] = url(model_admin, "django_rqueue_workflows", queue)
    action = "resume" if card.counts.paused else "pause"
    card.toggle_url = url(model_admin, "django_rqueue_queue_action", queue, action)
    card.empty_url = url(model_admin, "django_rqueue_empty_queue", queue)


def _worker_row(info: WorkerInfo) -> dict[str, Any]:
    return {
        "id": info.id,
        "host": info.host,
        "pid": info.pid,
        "queues": ", ".join(info.queues),
        "jobs": [j.id for j in info.jobs],
        "heartbeat": ms_to_datetime(info.heartbeat) if info.heartbeat else None,
        "poller": info.poller,
    }
