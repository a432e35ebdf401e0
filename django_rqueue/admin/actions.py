"""Retry, run now, cancel and delete jobs; pause and resume queues: GET shows a
confirmation, POST acts.

Every mutation answers with a ``messages`` line and a redirect, and is
recorded in the admin's history (``LogEntry``). A job that changed state
since the page was rendered is reported and left alone.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_http_methods, require_POST

from ..conf import get_config
from ..engine.calls import FailedBatchMode
from ..engine.keys import queue_of
from ..exceptions import JobStateError, RedisUnavailable
from ..job import JobStatus
from ..ops import operations
from ..ops.counts import queue_counts
from ..ops.listings import STATES, JobSource
from .common import (
    ACTION_PERMISSION,
    JOB_ACTIONS,
    AdminAction,
    Crumb,
    RqueueAdmin,
    context,
    declared_queue,
    job_id_in_url,
    job_url,
    log,
    require,
    url,
)
from .detail import load


def _action(name: str) -> AdminAction:
    try:
        return JOB_ACTIONS[name]
    except KeyError:
        raise Http404(f"No action {name!r}.") from None


def _next(request: HttpRequest, default: str) -> str:
    target = request.POST.get("next") or request.GET.get("next") or ""
    if target and url_has_allowed_host_and_scheme(
        target, {request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return default


def _confirm(
    request: HttpRequest,
    model_admin: RqueueAdmin,
    *,
    queue: str,
    question: str,
    items: list[tuple[str, str, str]],
    post_url: str,
    submit: str,
    cancel_url: str,
    hidden: list[tuple[str, str]],
    crumbs: list[Crumb] | None = None,
    notes: list[str] | None = None,
) -> TemplateResponse:
    """The "Are you sure?" page: ``items`` are (id, name, URL), ``hidden`` fields go back;
    ``crumbs`` lead to it (default: the queue's name, if any)."""
    if crumbs is None:
        crumbs = [(queue, "")] if queue else []
    return TemplateResponse(
        request,
        "admin/django_rqueue/confirm.html",
        context(
            request,
            model_admin,
            _("Are you sure?"),
            crumbs=[*crumbs, (_("Are you sure?"), "")],
            queue=queue,
            question=question,
            items=items,
            post_url=post_url,
            submit=submit,
            cancel_url=cancel_url,
            hidden=hidden,
            notes=notes or [],
        ),
    )


@require_http_methods(["GET", "POST"])
def job_action(
    request: HttpRequest, model_admin: RqueueAdmin, job_id: str, action: str
) -> HttpResponse:
    """Apply ``action`` to one job (confirmation page on GET)."""
    what = _action(action)
    verb = str(what.done)
    require(request, model_admin, what.permission)
    job_id = job_id_in_url(job_id)
    job, _raw = load(job_id)
    back = url(model_admin, "django_rqueue_job_list", job.queue, job.status.value)
    if job.status.value not in STATES:
        back = url(model_admin, "django_rqueue_dashboard_changelist")
    if job.status is JobStatus.WAITING and job.status not in operations.JobAction(action).states:
        # Not offered (the job page and the list leave the button out): the action's
        # script would leave the job in its queue's `waiting` zset.
        messages.warning(
            request,
            _("Job %(id)s waits for its inputs: it cannot be %(verb)s from here.")
            % {"id": job_id, "verb": verb},
        )
        return HttpResponseRedirect(job_url(model_admin, job_id))
    if request.method == "GET":
        return _confirm(
            request,
            model_admin,
            queue=job.queue,
            question=str(what.question) % {"state": job.status.value},
            items=[(job_id, job.name, job_url(model_admin, job_id))],
            post_url=job_url(model_admin, job_id, action),
            submit=str(what.confirm),
            cancel_url=job_url(model_admin, job_id),
            hidden=[("next", _next(request, back))],
        )
    try:
        note = operations.perform(job_id, action)
    except JobStateError as exc:
        if job.workflow_id and action == "retry":
            messages.warning(request, str(exc))  # its workflow cannot be retried: says why
        else:
            messages.warning(
                request,
                _("Job %(id)s was not %(verb)s: it is %(state)s now (it changed meanwhile).")
                % {"id": job_id, "verb": verb, "state": exc.state or _("gone")},
            )
        return HttpResponseRedirect(job_url(model_admin, job_id) if exc.state else back)
    if note is not None:  # a node's retry retried its workflow's failed nodes
        log(request, job_id, note, deletion=False)
        messages.success(request, note)
        return HttpResponseRedirect(_next(request, job_url(model_admin, job_id)))
    if action == "cancel" and job.status is JobStatus.RUNNING:
        verb = _("asked to stop")
        log(request, job_id, f"cancel requested while running ({job.name})", deletion=False)
        messages.success(
            request,
            _("Job %(id)s: its worker was asked to stop it; it ends cancelled once stopped.")
            % {"id": job_id},
        )
        return HttpResponseRedirect(job_url(model_admin, job_id))
    log(request, job_id, f"{verb} ({job.name})", deletion=action == "delete")
    messages.success(request, _("Job %(id)s %(verb)s.") % {"id": job_id, "verb": verb})
    if action in ("delete", "cancel"):
        return HttpResponseRedirect(_next(request, back))
    return HttpResponseRedirect(_next(request, job_url(model_admin, job_id)))


@require_POST
def selected(request: HttpRequest, model_admin: RqueueAdmin, queue: str = "") -> HttpResponse:
    """Apply an action to the ticked jobs of a list (confirmation first, both POST).

    ``queue`` is the list's queue (``""``: a list of several queues, any declared one).
    """
    if queue:
        declared_queue(queue)
        post_url = url(model_admin, "django_rqueue_selected", queue)
    else:
        post_url = url(model_admin, "django_rqueue_failed_selected")
    action = request.POST.get("action", "")
    what = _action(action)
    verb = str(what.done)
    require(request, model_admin, what.permission)
    queues = [queue] if queue else list(get_config().queues)
    ids = [i for i in dict.fromkeys(request.POST.getlist("ids")) if queue_of(i) in queues]
    back = _next(request, url(model_admin, "django_rqueue_dashboard_changelist"))
    if not ids:
        messages.warning(request, _("No jobs were selected; nothing was changed."))
        return HttpResponseRedirect(back)
    if request.POST.get("confirm") != "yes":
        return _confirm(
            request,
            model_admin,
            queue=queue,
            question=str(what.question_many) % {"n": len(ids)},
            items=[(i, "", job_url(model_admin, i)) for i in ids],
            post_url=post_url,
            submit=str(what.confirm),
            cancel_url=back,
            hidden=[("action", action), ("confirm", "yes"), ("next", back)]
            + [("ids", i) for i in ids],
        )
    outcome = operations.perform_many(ids, action)
    for job_id in outcome.done:
        log(request, job_id, verb, deletion=action == "delete")
    if outcome.done:
        messages.success(
            request, _("%(n)d jobs %(verb)s.") % {"n": len(outcome.done), "verb": verb}
        )
    for job_id, why in outcome.refused:
        messages.warning(
            request,
            _("Job %(id)s was not %(verb)s: %(why)s (it changed meanwhile).")
            % {"id": job_id, "verb": verb, "why": why},
        )
    return HttpResponseRedirect(back)


@require_http_methods(["GET", "POST"])
def all_failed(
    request: HttpRequest, model_admin: RqueueAdmin, queue: str, action: str
) -> HttpResponse:
    """Retry or delete every failed job of ``queue`` (optionally of one name), in batches."""
    declared_queue(queue)
    if action not in ("retry", "delete"):
        raise Http404(f"No action {action!r}.")
    require(request, model_admin, ACTION_PERMISSION[action])
    name = (request.POST.get("name") or request.GET.get("name") or "").strip()
    back = url(model_admin, "django_rqueue_job_list", queue, "failed")
    if request.method == "GET":
        total = JobSource(queue, JobStatus.FAILED).count()
        what = _("the jobs named %(name)s among") % {"name": name} if name else _("all")
        return _confirm(
            request,
            model_admin,
            queue=queue,
            question=_("%(action)s %(what)s the %(n)d failed jobs of queue %(queue)s?")
            % {"action": action.capitalize(), "what": what, "n": total, "queue": queue},
            items=[],
            post_url=url(model_admin, "django_rqueue_all_failed", queue, action),
            submit=_("Yes, %(action)s them") % {"action": action},
            cancel_url=back,
            hidden=[("name", name)],
        )
    try:
        mode: FailedBatchMode = "retry" if action == "retry" else "delete"
        result = operations.process_failed(queue, mode, name=name)
    except RedisUnavailable as exc:
        messages.error(request, str(exc))
        return HttpResponseRedirect(back)
    verb = str(JOB_ACTIONS[action].done)
    text = _("%(n)d failed jobs of queue %(queue)s %(verb)s") % {
        "n": result.done,
        "queue": queue,
        "verb": verb,
    }
    if name:
        text += _(" (name %(name)s)") % {"name": name}
    log(request, f"{queue}:failed", text, deletion=action == "delete")
    messages.success(request, text + ".")
    return HttpResponseRedirect(back)


#: Queue action -> (what it calls, verb for messages and the history).
QUEUE_ACTIONS = {
    "pause": (operations.pause_queue, "paused"),
    "resume": (operations.resume_queue, "resumed"),
}


@require_http_methods(["GET", "POST"])
def queue_action(
    request: HttpRequest, model_admin: RqueueAdmin, queue: str, action: str
) -> HttpResponse:
    """Pause or resume ``queue`` (needs ``change_job``; the overview's buttons POST here)."""
    declared_queue(queue)
    if action not in QUEUE_ACTIONS:
        raise Http404(f"No action {action!r}.")
    require(request, model_admin, "change")
    back = url(model_admin, "django_rqueue_dashboard_changelist")
    if request.method == "GET":
        return _confirm(
            request,
            model_admin,
            queue=queue,
            question=_("%(action)s queue %(queue)s?")
            % {"action": action.capitalize(), "queue": queue},
            items=[],
            post_url=url(model_admin, "django_rqueue_queue_action", queue, action),
            submit=_("Yes, %(action)s") % {"action": action},
            cancel_url=back,
            hidden=[],
        )
    perform, verb = QUEUE_ACTIONS[action]
    try:
        changed = perform(queue)
    except RedisUnavailable as exc:
        messages.error(request, str(exc))
        return HttpResponseRedirect(back)
    if changed:
        text = _("Queue %(queue)s %(verb)s.") % {"queue": queue, "verb": verb}
        log(request, f"{queue}:queue", text)
        messages.success(request, text)
    elif action == "pause":
        messages.info(request, _("Queue %(queue)s was already paused.") % {"queue": queue})
    else:
        messages.info(request, _("Queue %(queue)s was not paused.") % {"queue": queue})
    return HttpResponseRedirect(back)


@require_http_methods(["GET", "POST"])
def empty_queue(request: HttpRequest, model_admin: RqueueAdmin, queue: str) -> HttpResponse:
    """Delete the queued jobs of ``queue`` (needs ``delete_job``; confirmation page on GET)."""
    declared_queue(queue)
    require(request, model_admin, "delete")
    back = _next(request, url(model_admin, "django_rqueue_dashboard_changelist"))
    if request.method == "GET":
        try:
            counts = queue_counts(queue)
        except RedisUnavailable as exc:
            messages.error(request, str(exc))
            return HttpResponseRedirect(back)
        return _confirm(
            request,
            model_admin,
            queue=queue,
            question=ngettext(
                "Delete the %(n)d queued job of queue %(queue)s?",
                "Delete the %(n)d queued jobs of queue %(queue)s?",
                counts.queued,
            )
            % {"n": counts.queued, "queue": queue},
            items=[],
            post_url=url(model_admin, "django_rqueue_empty_queue", queue),
            submit=_("Yes, delete them"),
            cancel_url=back,
            hidden=[("next", back)],
            notes=[
                _(
                    "The jobs are deleted for good: no worker runs them, and they cannot be"
                    " retried."
                ),
                ngettext(
                    "The %(n)d scheduled job (delayed, or waiting to be retried) is kept:"
                    " it is queued when it is due.",
                    "The %(n)d scheduled jobs (delayed, or waiting to be retried) are kept:"
                    " each is queued when it is due.",
                    counts.scheduled,
                )
                % {"n": counts.scheduled},
                ngettext(
                    "The %(n)d running job is not stopped: it finishes as usual, and is"
                    " retried later if it fails and has attempts left.",
                    "The %(n)d running jobs are not stopped: they finish as usual, and are"
                    " retried later if they fail and have attempts left.",
                    counts.running,
                )
                % {"n": counts.running},
                _("Failed jobs stay in the failed list."),
                _(
                    "Jobs queued while the queue is being emptied may be deleted too. To stop"
                    " new work from starting instead, pause the queue."
                ),
            ],
        )
    try:
        result = operations.empty_queue(queue)
    except RedisUnavailable as exc:
        messages.error(request, str(exc))
        return HttpResponseRedirect(back)
    text = ngettext(
        "Queue %(queue)s emptied: %(n)d queued job deleted.",
        "Queue %(queue)s emptied: %(n)d queued jobs deleted.",
        result.deleted,
    ) % {"queue": queue, "n": result.deleted}
    log(request, f"{queue}:queue", text, deletion=True)
    messages.success(request, text)
    return HttpResponseRedirect(back)
