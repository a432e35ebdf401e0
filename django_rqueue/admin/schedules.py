"""The periodic jobs page: every ``RQUEUE["SCHEDULE"]`` entry, with run now, pause and resume.

Each entry shows when it runs, its next tick, its latest run (a link to that
job) and whether it is paused. The actions follow the other admin actions:
GET shows a confirmation, POST acts (``change_job`` permission), answers
with a ``messages`` line and a redirect, and is recorded in the admin's
history (``LogEntry``, object id ``schedule:<entry>``).
"""

from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods

from ..conf import get_config
from ..exceptions import RedisUnavailable, UnknownEntry, UnknownJob
from ..periodic import runtime
from .actions import _confirm
from .common import PAGE_SIZE, RqueueAdmin, context, job_url, log, require, url

#: Action -> (the past participle the messages use, confirmation question).
SCHEDULE_ACTIONS = {
    "run_now": ("enqueued", "Run %(entry)s now, outside its schedule?"),
    "pause": ("paused", "Pause %(entry)s? Its runs are skipped until it is resumed."),
    "resume": ("resumed", "Resume %(entry)s? It runs again from its next tick."),
}


def schedule_list(request: HttpRequest, model_admin: RqueueAdmin) -> HttpResponse:
    """The entries, by name, a page at a time (two Redis reads per entry shown)."""
    names = sorted(get_config().schedule)
    page = Paginator(names, PAGE_SIZE).get_page(request.GET.get("page"))
    rows, redis_error = [], ""
    labels = {"run_now": _("Run now"), "pause": _("Pause"), "resume": _("Resume")}
    try:
        states = runtime.entry_states(page.object_list)
    except RedisUnavailable as exc:
        states, redis_error = [], str(exc)
    for state in states:
        rows.append(
            {
                "state": state,
                "last_job_url": job_url(model_admin, state.last_job_id)
                if state.last_job_id
                else "",
                "actions": [
                    (
                        action,
                        labels[action],
                        url(model_admin, "django_rqueue_schedule_action", state.name, action),
                    )
                    for action in ("run_now", "resume" if state.paused else "pause")
                ],
            }
        )
    return TemplateResponse(
        request,
        "admin/django_rqueue/schedules.html",
        context(
            request,
            model_admin,
            _("Periodic jobs"),
            crumbs=[(_("Periodic jobs"), "")],
            rows=rows,
            page_obj=page,
            page_range=page.paginator.get_elided_page_range(page.number),
            redis_error=redis_error,
        ),
    )


@require_http_methods(["GET", "POST"])
def schedule_action(
    request: HttpRequest, model_admin: RqueueAdmin, entry: str, action: str
) -> HttpResponse:
    """Run now, pause or resume the entry ``entry`` (confirmation page on GET)."""
    if action not in SCHEDULE_ACTIONS:
        raise Http404(f"No action {action!r}.")
    if entry not in get_config().schedule:
        raise Http404(f"No schedule entry {entry!r}.")
    require(request, model_admin, "change")
    verb, question = SCHEDULE_ACTIONS[action]
    back = url(model_admin, "django_rqueue_schedules")
    here = url(model_admin, "django_rqueue_schedule_action", entry, action)
    if request.method == "GET":
        return _confirm(
            request,
            model_admin,
            queue="",
            question=_(question) % {"entry": entry},
            items=[],
            post_url=here,
            submit=_("Yes, %(action)s") % {"action": action.replace("_", " ")},
            cancel_url=back,
            hidden=[],
            crumbs=[(_("Periodic jobs"), back)],
        )
    try:
        if action == "run_now":
            job = runtime.run_now(entry)
            text = _("Schedule entry %(entry)s enqueued as job %(id)s.") % {
                "entry": entry,
                "id": job.id,
            }
        else:
            (runtime.pause if action == "pause" else runtime.resume)(entry)
            text = _("Schedule entry %(entry)s %(verb)s.") % {"entry": entry, "verb": verb}
    except (UnknownEntry, UnknownJob, ValueError, TypeError, RedisUnavailable) as exc:
        messages.error(
            request,
            _("Schedule entry %(entry)s: %(error)s")
            % {
                "entry": entry,
                "error": exc,
            },
        )
        return HttpResponseRedirect(back)
    log(request, f"schedule:{entry}", text)
    messages.success(request, text)
    return HttpResponseRedirect(back)
