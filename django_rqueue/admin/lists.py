"""One generic job list, parametrized by state (and, for queued jobs, priority and group)."""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.html import format_html
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from ..conf import get_config
from ..exceptions import RedisUnavailable
from ..job import JobStatus
from ..ops import counts, listings
from ..ops.operations import JobAction
from .common import (
    JOB_ACTIONS,
    PAGE_SIZE,
    RqueueAdmin,
    allowed,
    context,
    declared_queue,
    job_url,
    url,
    workflow_url,
)

if TYPE_CHECKING:
    from django.utils.functional import _StrPromise

#: A column's cell: what it shows of a listed row.
Cell = Callable[[listings.Row], Any]


def _error(row: listings.Row) -> str:
    error = row.job.error if row.job else None
    if not error:
        return ""
    return f"{error['type'].rsplit('.', 1)[-1]}: {error['message']}"[:200]


def _result(row: listings.Row) -> str:
    return json.dumps(row.job.result, default=str)[:100] if row.job else ""


def _attempts(row: listings.Row) -> str:
    return f"{row.job.attempts}/{row.job.max_attempts}" if row.job else ""


def _arrived(row: listings.Row) -> str:
    """A waiting job's inputs that ended, of all its inputs: "1/3"."""
    inputs = row.job.inputs if row.job else None
    if inputs is None:
        return ""
    return f"{max(0, inputs.count - inputs.missing)}/{inputs.count}"


def _workflow(row: listings.Row) -> str:
    return (row.job.workflow_id or "") if row.job else ""


#: State -> (title, the "at" column's header, other columns).
COLUMNS: dict[str, tuple[_StrPromise, _StrPromise, list[tuple[_StrPromise, Cell]]]] = {
    "waiting": (
        gettext_lazy("Waiting jobs"),
        gettext_lazy("Dependency deadline"),
        [(gettext_lazy("Inputs ended"), _arrived), (gettext_lazy("Workflow"), _workflow)],
    ),
    "queued": (
        gettext_lazy("Queued jobs"),
        gettext_lazy("Due since"),
        [(gettext_lazy("Attempts"), _attempts)],
    ),
    "scheduled": (
        gettext_lazy("Scheduled jobs"),
        gettext_lazy("Run at"),
        [(gettext_lazy("Attempts"), _attempts), (gettext_lazy("Last error"), _error)],
    ),
    "running": (
        gettext_lazy("Running jobs"),
        gettext_lazy("Lease deadline"),
        [
            (gettext_lazy("Worker"), lambda r: r.job.worker if r.job else ""),
            (gettext_lazy("Started"), lambda r: r.job.started_at if r.job else None),
            (gettext_lazy("Attempt"), _attempts),
        ],
    ),
    "failed": (
        gettext_lazy("Failed jobs"),
        gettext_lazy("Failed at"),
        [(gettext_lazy("Error"), _error), (gettext_lazy("Attempts"), _attempts)],
    ),
    "succeeded": (
        gettext_lazy("Recently succeeded jobs"),
        gettext_lazy("Finished"),
        [(gettext_lazy("Result"), _result), (gettext_lazy("Attempts"), _attempts)],
    ),
}

#: State -> bulk actions offered on its list (:func:`bulk_actions`).
BULK = {
    "waiting": ["cancel", "delete"],
    "queued": ["cancel", "delete"],
    "scheduled": ["run_now", "cancel", "delete"],
    "running": ["cancel"],
    "failed": ["retry", "delete"],
    "succeeded": ["delete"],
}


def bulk_actions(state: str) -> list[str]:
    """The bulk actions of the list of ``state``: those of :data:`BULK` whose
    :class:`~django_rqueue.ops.operations.JobAction` applies to the state (a waiting job's
    cancel and delete are offered once they take it out of its queue's ``waiting`` zset)."""
    return [a for a in BULK[state] if JobStatus(state) in JobAction(a).states]


def list_title(state: str) -> _StrPromise:
    """The title of the list of jobs in ``state`` ("Failed jobs")."""
    return COLUMNS[state][0]


def _cells(model_admin: RqueueAdmin, row: listings.Row, state: str) -> list[Any]:
    at: datetime.datetime | str | None
    if row.job is not None and state == "queued":
        at = row.job.run_at
    elif state == "waiting" and row.at is None:
        at = _("none")  # it waits as long as its inputs run
    else:
        at = row.at
    cells = [at, *(cell(row) for _, cell in COLUMNS[state][2])]
    if state == "waiting" and cells[-1]:  # its workflow: a link to the workflow's page
        cells[-1] = format_html(
            '<a href="{}">{}</a>', workflow_url(model_admin, cells[-1]), cells[-1]
        )
    return cells


def job_list(
    request: HttpRequest, model_admin: RqueueAdmin, queue: str, state: str
) -> HttpResponse:
    """List the jobs of ``queue`` in ``state``, a page at a time."""
    declared_queue(queue)
    if state not in listings.STATES:
        raise Http404(f"No job state {state!r}.")
    title, at_header, columns = COLUMNS[state]
    extra: dict[str, Any] = {}
    name = request.GET.get("name", "").strip()
    try:
        if state == JobStatus.FAILED:
            extra["retention"] = retention_text(counts.failed_retention(queue))
        source = _source(request, queue, JobStatus(state), extra)
        if extra.get("groups_page") is not None:
            rows: list[listings.Row] = []
        elif name:
            cursor = _int(request.GET.get("cursor"), 0)
            if not 0 <= cursor <= MAX_CURSOR:  # not one this page handed out: start over
                cursor = 0
            found = listings.filtered_page(source, name, cursor, PAGE_SIZE)
            rows = found.rows
            extra.update(cursor=cursor, next_cursor=found.next_cursor, scanned=found.scanned)
        else:
            paginator: Paginator[listings.Row] = Paginator(cast(Any, source), PAGE_SIZE)
            page_obj = paginator.get_page(request.GET.get("page"))
            rows = list(page_obj.object_list)
            extra.update(page_obj=page_obj, page_range=_page_range(page_obj))
    except RedisUnavailable as exc:
        rows, extra["redis_error"] = [], str(exc)
    actions = [
        (a, JOB_ACTIONS[a].selected)
        for a in bulk_actions(state)
        if allowed(request, model_admin, a)
    ]
    return TemplateResponse(
        request,
        "admin/django_rqueue/job_list.html",
        context(
            request,
            model_admin,
            f"{title} — {queue}",
            crumbs=[(queue, ""), (str(title), "")],
            queue=queue,
            state=state,
            states=[
                *(
                    (s, url(model_admin, "django_rqueue_job_list", queue, s))
                    for s in listings.STATES
                ),
                ("workflows", url(model_admin, "django_rqueue_workflows", queue)),
            ],
            headers=[_("Job"), _("Name"), at_header, *(h for h, _cell in columns)],
            rows=[
                {
                    "id": r.id,
                    "url": job_url(model_admin, r.id),
                    "name": r.job.name if r.job else "",
                    "cells": _cells(model_admin, r, state),
                    "problems": r.job.problems if r.job else [_("the record is gone")],
                }
                for r in rows
            ],
            name=name,
            bulk_actions=actions,
            selected_url=url(model_admin, "django_rqueue_selected", queue),
            retry_all_url=url(model_admin, "django_rqueue_all_failed", queue, "retry"),
            delete_all_url=url(model_admin, "django_rqueue_all_failed", queue, "delete"),
            empty_url=url(model_admin, "django_rqueue_empty_queue", queue),
            **extra,
        ),
    )


def duration(seconds: int) -> str:
    """``seconds`` in the largest whole unit: "90 days", "2 hours", "90 seconds"."""
    if seconds % 86400 == 0:
        n = seconds // 86400
        return ngettext("%(n)d day", "%(n)d days", n) % {"n": n}
    if seconds % 3600 == 0:
        n = seconds // 3600
        return ngettext("%(n)d hour", "%(n)d hours", n) % {"n": n}
    if seconds % 60 == 0:
        n = seconds // 60
        return ngettext("%(n)d minute", "%(n)d minutes", n) % {"n": n}
    return ngettext("%(n)d second", "%(n)d seconds", seconds) % {"n": seconds}


def retention_text(retention: counts.FailedRetention) -> str:
    """What the failed list says of the failed store's retention."""
    if retention.ttl is None and retention.max_jobs is None:
        rule = _("Failed jobs are kept until they are retried or deleted.")
    elif retention.max_jobs is None:
        rule = _("Failed jobs are deleted %(ttl)s after they failed.") % {
            "ttl": duration(retention.ttl or 0)
        }
    elif retention.ttl is None:
        rule = _("At most %(max)d failed jobs are kept, the oldest deleted first.") % {
            "max": retention.max_jobs
        }
    else:
        rule = _(
            "Failed jobs are deleted %(ttl)s after they failed, and at most %(max)d are kept,"
            " the oldest deleted first."
        ) % {"ttl": duration(retention.ttl), "max": retention.max_jobs}
    deleted = ngettext(
        "%(n)d failed job was deleted by this rule so far.",
        "%(n)d failed jobs were deleted by this rule so far.",
        retention.trimmed,
    ) % {"n": retention.trimmed}
    return f"{rule} {deleted}"


#: The largest ``cursor`` a filtered list accepts: a rank that, plus the ranks read after
#: it, stays within the signed 64-bit integers Redis takes (far beyond any list's end); a
#: larger, negative or non-numeric one shows the first page.
MAX_CURSOR = 2**62


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def _page_range(page_obj: Any) -> list[int | str]:  # django Page
    return list(page_obj.paginator.get_elided_page_range(page_obj.number))


def _source(
    request: HttpRequest, queue: str, state: JobStatus, extra: dict[str, Any]
) -> listings.JobSource:
    """The job source to list; for queued jobs also the priority tabs and groups."""
    if state is not JobStatus.QUEUED:
        return listings.JobSource(queue, state)
    prios = listings.priorities(queue)
    priority = _int(request.GET.get("prio"), prios[0] if prios else 0)
    extra.update(priorities=prios, priority=priority)
    group = request.GET.get("group")
    if group is None:
        count = listings.group_count(queue, priority)
        if count == 1:
            group = listings.groups(queue, priority, 0, 0)[0].group
        elif count > 1:
            paginator: Paginator[listings.GroupRow] = Paginator(
                cast(Any, _Groups(queue, priority, count)), PAGE_SIZE
            )
            groups_page = paginator.get_page(request.GET.get("page"))
            extra.update(
                groups_page=groups_page,
                page_obj=groups_page,
                page_range=_page_range(groups_page),
                group_count=count,
            )
            return listings.JobSource(queue, state, priority, "")
        else:
            group = ""
    extra.update(group=group, group_label=group or _("(default group)"))
    return listings.JobSource(queue, state, priority, group)


class _Groups:
    """The groups of one priority level, sliceable for ``Paginator``."""

    def __init__(self, queue: str, priority: int, count: int) -> None:
        self.queue, self.priority, self._count = queue, priority, count

    def count(self) -> int:
        return self._count

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index: slice) -> list[listings.GroupRow]:
        start, stop = index.start or 0, index.stop or self._count
        return listings.groups(self.queue, self.priority, start, stop - 1)


def _offsets(text: str | None, count: int) -> list[int]:
    """The per-queue offsets of a cross-queue page, from ``"3.0.12"`` (bad input: the first)."""
    parts = (text or "").split(".")
    if len(parts) != count or not all(p.isdigit() for p in parts):
        return [0] * count
    return [int(p) for p in parts]


def failed_all(request: HttpRequest, model_admin: RqueueAdmin) -> HttpResponse:
    """The failed jobs of every declared queue, newest first, a page at a time."""
    queues = list(get_config().queues)
    offsets = _offsets(request.GET.get("after"), len(queues))
    found = listings.failed_across(queues, offsets, PAGE_SIZE)
    actions = [
        (a, JOB_ACTIONS[a].selected) for a in BULK["failed"] if allowed(request, model_admin, a)
    ]
    title = _("Failed jobs of all queues")
    return TemplateResponse(
        request,
        "admin/django_rqueue/failed_all.html",
        context(
            request,
            model_admin,
            title,
            crumbs=[(title, "")],
            headers=[_("Job"), _("Queue"), _("Name"), _("Failed at"), _("Error"), _("Attempts")],
            rows=[
                {
                    "id": r.id,
                    "url": job_url(model_admin, r.id),
                    "queue": r.job.queue if r.job else "",
                    "queue_url": url(model_admin, "django_rqueue_job_list", r.job.queue, "failed")
                    if r.job
                    else "",
                    "name": r.job.name if r.job else "",
                    "cells": [r.at, _error(r), _attempts(r)],
                    "problems": r.job.problems if r.job else [_("the record is gone")],
                }
                for r in found.rows
            ],
            total=found.total,
            first_page=not any(found.offsets),
            next_page=".".join(map(str, found.next_offsets)) if found.next_offsets else "",
            redis_errors=found.errors,
            bulk_actions=actions,
            selected_url=url(model_admin, "django_rqueue_failed_selected"),
        ),
    )
