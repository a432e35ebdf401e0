"""What every rqueue admin view shares: context, permissions, URLs, history."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast

import django
from django.contrib.admin import AdminSite
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.contrib.admin.utils import quote, unquote
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest
from django.urls import reverse
from django.utils.text import capfirst
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from ..conf import get_config
from ..models import Dashboard
from ..ops.operations import JobAction

if TYPE_CHECKING:
    from django.utils.functional import _StrOrPromise as StrOrPromise
else:
    StrOrPromise = str

#: Jobs per page of a listing.
PAGE_SIZE = 50

#: Django 6.1 writes breadcrumbs as ``<ol class="breadcrumbs">`` of ``<li>`` (and styles only
#: that); 5.2 and 6.0 as ``<div class="breadcrumbs">`` with ``&rsaquo;`` between the links.
BREADCRUMBS_AS_LIST = django.VERSION >= (6, 1)

#: A breadcrumb: its text and its link (``""``: the current page, not a link).
Crumb = tuple[str, str]


class RqueueAdmin(Protocol):
    """What the views use of the ``ModelAdmin`` they are mounted by (:class:`.options.JobAdmin`)."""

    @property
    def model(self) -> type[Dashboard]: ...

    @property
    def admin_site(self) -> AdminSite: ...

    def has_view_permission(self, request: HttpRequest) -> bool: ...

    def has_change_permission(self, request: HttpRequest) -> bool: ...

    def has_delete_permission(self, request: HttpRequest) -> bool: ...


def context(
    request: HttpRequest,
    model_admin: RqueueAdmin,
    title: str,
    *,
    crumbs: list[Crumb] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The admin site's ``each_context`` plus what the rqueue templates use.

    ``crumbs`` are the breadcrumbs after "Home › Rqueue › Queues and jobs" (none: the
    overview itself); the last one is the current page.
    """
    opts = model_admin.model._meta
    site = model_admin.admin_site.name
    overview_url = url(model_admin, "django_rqueue_dashboard_changelist")
    trail: list[Crumb] = [
        (_("Home"), reverse(f"{site}:index", current_app=site)),
        (
            str(opts.app_config.verbose_name),
            reverse(f"{site}:app_list", kwargs={"app_label": opts.app_label}, current_app=site),
        ),
        (capfirst(str(opts.verbose_name_plural)), overview_url),
        *(crumbs or []),
    ]
    return {
        **model_admin.admin_site.each_context(request),
        "title": title,
        "opts": opts,
        "app_label": opts.app_label,
        "breadcrumbs": [*trail[:-1], (trail[-1][0], "")],
        "breadcrumbs_as_list": BREADCRUMBS_AS_LIST,
        "overview_url": overview_url,
        "can_change": model_admin.has_change_permission(request),
        "can_delete": model_admin.has_delete_permission(request),
        "queue_names": list(get_config().queues),
        **extra,
    }


def url(model_admin: RqueueAdmin, name: str, *args: str) -> str:
    """Reverse one of the rqueue admin URLs on the site ``model_admin`` is mounted on."""
    site = model_admin.admin_site.name
    return reverse(f"{site}:{name}", args=args, current_app=site)


def job_url(model_admin: RqueueAdmin, job_id: str, action: str = "") -> str:
    """The admin URL of the page of ``job_id``, or of its ``action``'s confirmation page."""
    if action:
        return url(model_admin, "django_rqueue_job_action", quote(job_id), action)
    return url(model_admin, "django_rqueue_job_change", quote(job_id))


def workflow_url(model_admin: RqueueAdmin, workflow_id: str, action: str = "") -> str:
    """The admin URL of the page of the workflow ``workflow_id`` (quoted as job ids are), or
    of its ``action``'s confirmation page (``cancel``, ``retry-failed``)."""
    if action:
        return url(model_admin, "django_rqueue_workflow_action", quote(workflow_id), action)
    return url(model_admin, "django_rqueue_workflow", quote(workflow_id))


def job_id_in_url(value: str) -> str:
    """The job id in a job page's URL: quoted as the admin quotes ids (:func:`job_url`:
    ``":"`` -> ``"_3A"``, ``"_"`` -> ``"_5F"``), or as it is, as
    ``reverse("admin:django_rqueue_job_change", args=[job.id])`` puts it. Every id has a
    ``":"`` (``<queue>:<...>``) and no quoted one has, so either is read right."""
    return value if ":" in value else unquote(value)


def declared_queue(queue: str) -> str:
    """Return ``queue`` if it is declared, else raise 404."""
    if queue not in get_config().queues:
        raise Http404(f"No queue named {queue!r}.")
    return queue


@dataclass(frozen=True)
class AdminAction:
    """An action on jobs as the admin words it (each text translatable) and who may apply it.

    The states it applies to, and its :attr:`done` verb, are its
    :class:`~django_rqueue.ops.operations.JobAction`'s.
    """

    name: str
    #: The button on a job's page ("Run now").
    label: StrOrPromise
    #: The entry of a list's action menu ("Run selected jobs now").
    selected: StrOrPromise
    #: The question of the confirmation page for one job; ``%(state)s`` is its state.
    question: StrOrPromise
    #: The question for several jobs; ``%(n)d`` is how many.
    question_many: StrOrPromise
    #: The confirmation page's button ("Yes, run now").
    confirm: StrOrPromise
    #: What became of the job, for messages and the history ("queued to run now").
    done: StrOrPromise
    #: The permission it needs: ``change`` or ``delete``.
    permission: str


#: Every action on jobs, declared once.
JOB_ACTIONS: dict[str, AdminAction] = {
    a.name: a
    for a in (
        AdminAction(
            "retry",
            gettext_lazy("Retry"),
            gettext_lazy("Retry selected jobs"),
            gettext_lazy("Retry this %(state)s job?"),
            gettext_lazy("Retry these %(n)d jobs?"),
            gettext_lazy("Yes, retry"),
            JobAction.RETRY.verb,
            "change",
        ),
        AdminAction(
            "run_now",
            gettext_lazy("Run now"),
            gettext_lazy("Run selected jobs now"),
            gettext_lazy("Run this %(state)s job now?"),
            gettext_lazy("Run these %(n)d jobs now?"),
            gettext_lazy("Yes, run now"),
            JobAction.RUN_NOW.verb,
            "change",
        ),
        AdminAction(
            "cancel",
            gettext_lazy("Cancel"),
            gettext_lazy("Cancel selected jobs"),
            gettext_lazy("Cancel this %(state)s job?"),
            gettext_lazy("Cancel these %(n)d jobs?"),
            gettext_lazy("Yes, cancel"),
            JobAction.CANCEL.verb,
            "delete",
        ),
        AdminAction(
            "delete",
            gettext_lazy("Delete"),
            gettext_lazy("Delete selected jobs"),
            gettext_lazy("Delete this %(state)s job?"),
            gettext_lazy("Delete these %(n)d jobs?"),
            gettext_lazy("Yes, delete"),
            JobAction.DELETE.verb,
            "delete",
        ),
    )
}

#: Permission each action needs.
ACTION_PERMISSION = {a.name: a.permission for a in JOB_ACTIONS.values()}


def has_permission(request: HttpRequest, model_admin: RqueueAdmin, permission: str) -> bool:
    """Whether the user has ``permission`` (``view``, ``change`` or ``delete``)."""
    check = {
        "view": model_admin.has_view_permission,
        "change": model_admin.has_change_permission,
        "delete": model_admin.has_delete_permission,
    }[permission]
    return check(request)


def allowed(request: HttpRequest, model_admin: RqueueAdmin, action: str) -> bool:
    """Whether the user may apply ``action`` (``retry``, ``run_now``, ``cancel``, ``delete``)."""
    return has_permission(request, model_admin, ACTION_PERMISSION[action])


def require(request: HttpRequest, model_admin: RqueueAdmin, permission: str) -> None:
    """Raise ``PermissionDenied`` (403) unless the user has ``view``/``change``/``delete``."""
    if not has_permission(request, model_admin, permission):
        raise PermissionDenied


def log(request: HttpRequest, object_id: str, text: str, *, deletion: bool = False) -> None:
    """Record an action in the admin's history (``LogEntry``), as the admin does for models."""
    LogEntry.objects.create(
        user_id=cast(int, request.user.pk),
        content_type=ContentType.objects.get_for_model(Dashboard, for_concrete_model=False),
        object_id=object_id,
        object_repr=object_id[:200],
        action_flag=DELETION if deletion else CHANGE,
        change_message=text,
    )
