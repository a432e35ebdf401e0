"""Cancel a workflow, and retry its failed nodes, from its admin page: GET shows a
confirmation, POST acts (:mod:`~django_rqueue.workflows.control`).

As the job actions: each needs the permission the same job action needs (cancel:
``delete_job``; retry: ``change_job``), answers with a ``messages`` line and a redirect
to the workflow's page, and is recorded in the admin's history (``LogEntry``, the
workflow id as the object). A workflow that changed state since its page was rendered
(it finished, another user retried it) is reported, with the reason, and left alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext
from django.views.decorators.http import require_http_methods

from ..engine.keys import queue_of
from ..exceptions import RedisUnavailable, WorkflowStateError
from ..ops import workflow_listings as wl
from ..workflows import control
from .actions import _confirm
from .common import RqueueAdmin, job_id_in_url, log, require, url, workflow_url

if TYPE_CHECKING:
    from django.utils.functional import _StrPromise


@dataclass(frozen=True)
class WorkflowAction:
    """An action on a whole workflow as the admin words it, and the permission it needs."""

    #: The question of the confirmation page; ``%(id)s`` is the workflow's id.
    question: _StrPromise
    #: What the confirmation page adds (each a paragraph).
    notes: tuple[_StrPromise, ...]
    #: The confirmation page's button.
    confirm: _StrPromise
    #: ``change`` or ``delete``, as the job action of the same kind.
    permission: str


#: The actions of a workflow's page, by their name in its URL.
WORKFLOW_ACTIONS: Final = {
    "cancel": WorkflowAction(
        gettext_lazy("Cancel workflow %(id)s?"),
        (
            gettext_lazy(
                "Every node that has not ended is cancelled; a running node is asked to stop,"
                " and ends cancelled once its worker has stopped it."
            ),
            gettext_lazy(
                "The workflow then ends cancelled: its on_complete callback runs, its"
                " on_error callback does not."
            ),
        ),
        gettext_lazy("Yes, cancel it"),
        "delete",
    ),
    "retry-failed": WorkflowAction(
        gettext_lazy("Retry the failed nodes of workflow %(id)s?"),
        (
            gettext_lazy(
                "The failed nodes run again, and the nodes their failure cancelled run"
                " after them; a node that succeeded is never run again."
            ),
        ),
        gettext_lazy("Yes, retry them"),
        "change",
    ),
}


@require_http_methods(["GET", "POST"])
def workflow_action(
    request: HttpRequest, model_admin: RqueueAdmin, workflow_id: str, action: str
) -> HttpResponse:
    """Apply ``action`` (``cancel``, ``retry-failed``) to one workflow (confirmation on GET)."""
    what = WORKFLOW_ACTIONS.get(action)
    if what is None:
        raise Http404(f"No action {action!r}.")
    require(request, model_admin, what.permission)
    workflow_id = job_id_in_url(workflow_id)
    back = workflow_url(model_admin, workflow_id)
    if not wl.exists(workflow_id):
        raise Http404(_("No workflow with this id: it ended and expired, or was never created."))
    queue = queue_of(workflow_id) or ""
    if request.method == "GET":
        return _confirm(
            request,
            model_admin,
            queue=queue,
            question=str(what.question) % {"id": workflow_id},
            items=[(workflow_id, "", back)],
            post_url=workflow_url(model_admin, workflow_id, action),
            submit=str(what.confirm),
            cancel_url=back,
            hidden=[],
            crumbs=[
                (queue, ""),
                (_("Workflows"), url(model_admin, "django_rqueue_workflows", queue)),
                (workflow_id, back),
            ],
            notes=[str(n) for n in what.notes],
        )
    try:
        text = _cancel(workflow_id) if action == "cancel" else _retry(workflow_id)
    except WorkflowStateError as exc:
        messages.warning(
            request,
            _("Workflow %(id)s was left alone: %(why)s.") % {"id": workflow_id, "why": exc},
        )
        return HttpResponseRedirect(back)
    except RedisUnavailable as exc:
        messages.error(request, str(exc))
        return HttpResponseRedirect(back)
    log(request, workflow_id, text)
    messages.success(request, text)
    return HttpResponseRedirect(back)


def _cancel(workflow_id: str) -> str:
    done = control.cancel(workflow_id)
    return (
        _("Workflow %(id)s: cancel requested.") % {"id": workflow_id}
        + " "
        + ngettext(
            "%(n)d node cancelled",
            "%(n)d nodes cancelled",
            done.cancelled,
        )
        % {"n": done.cancelled}
        + ", "
        + ngettext(
            "%(n)d running node asked to stop.",
            "%(n)d running nodes asked to stop.",
            done.requested,
        )
        % {"n": done.requested}
    )


def _retry(workflow_id: str) -> str:
    plan = control.retry_failed(workflow_id)
    again = len(plan.requeues)
    rearmed = len(plan.arms) - 1  # the finisher is always re-armed
    return (
        _("Workflow %(id)s: failed nodes retried.") % {"id": workflow_id}
        + " "
        + ngettext(
            "%(n)d node queued again",
            "%(n)d nodes queued again",
            again,
        )
        % {"n": again}
        + ", "
        + ngettext(
            "%(n)d node waits to run after them.",
            "%(n)d nodes wait to run after them.",
            rearmed,
        )
        % {"n": rearmed}
    )
