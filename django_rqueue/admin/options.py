"""The ``ModelAdmin`` that mounts the rqueue pages in the Django admin."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path

from ..models import Dashboard
from . import actions, detail, lists, live, overview, schedules, workflow_actions, workflows
from .common import require

View = Callable[..., HttpResponse]


class Page(NamedTuple):
    """One admin page: its route under the app's admin URL, its view, its URL name (after
    ``django_rqueue_``), and the permission checked before the view runs (``None``: the
    view checks its own, after the module permission)."""

    route: str
    view: View
    name: str
    permission: str | None = "view"


PAGES = (
    Page("", overview.overview, "dashboard_changelist"),
    Page("schedules/", schedules.schedule_list, "schedules"),
    Page("failed/", lists.failed_all, "failed_all"),
    Page("live/counts/", live.live_counts, "live_counts"),
    Page("live/jobs/<str:job_id>/", live.live_job, "live_job"),
    Page("failed/selected/", actions.selected, "failed_selected", None),
    Page("schedules/<str:entry>/<str:action>/", schedules.schedule_action, "schedule_action", None),
    Page("queues/<str:queue>/failed/<str:action>-all/", actions.all_failed, "all_failed", None),
    Page("queues/<str:queue>/<str:action>-queue/", actions.queue_action, "queue_action", None),
    Page("queues/<str:queue>/empty/", actions.empty_queue, "empty_queue", None),
    Page("queues/<str:queue>/selected/", actions.selected, "selected", None),
    Page("queues/<str:queue>/workflows/", workflows.workflow_list, "workflows"),
    Page("queues/<str:queue>/<str:state>/", lists.job_list, "job_list"),
    Page("jobs/<str:job_id>/", detail.job_detail, "job_change"),
    Page("jobs/<str:job_id>/<str:action>/", actions.job_action, "job_action", None),
    Page("workflows/<str:workflow_id>/", workflows.workflow_detail, "workflow"),
    Page(
        "workflows/<str:workflow_id>/<str:action>/",
        workflow_actions.workflow_action,
        "workflow_action",
        None,
    ),
)

if TYPE_CHECKING:
    ModelAdminBase = admin.ModelAdmin[Dashboard]
else:  # ModelAdmin is generic only in django-stubs
    ModelAdminBase = admin.ModelAdmin


class JobAdmin(ModelAdminBase):
    """Queues and jobs, read from Redis; no add/change forms, no database table."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    # The permissions keep the codenames of the model's old name, Job (see models.py).
    def has_view_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return request.user.has_perm("django_rqueue.view_job") or self.has_change_permission(
            request
        )

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return request.user.has_perm("django_rqueue.change_job")

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return request.user.has_perm("django_rqueue.delete_job")

    def get_model_perms(self, request: HttpRequest) -> dict[str, bool]:
        """Only "view" for the admin index: its link reads "View", never "Change" (the pages
        have actions, but nothing here is edited in a form)."""
        return {
            "add": False,
            "change": False,
            "delete": False,
            "view": self.has_view_permission(request),
        }

    def get_urls(self) -> list[URLPattern]:
        def page(view: View, permission: str | None = "view") -> Callable[..., HttpResponse]:
            def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
                if permission is not None:
                    require(request, self, permission)
                elif not self.has_module_permission(request):
                    # Before the view looks a queue, entry or job up: a 404 for an unknown
                    # name would tell staff without any of the app's permissions which exist.
                    raise PermissionDenied
                return view(request, self, *args, **kwargs)

            return self.admin_site.admin_view(wrapper)

        return [
            path(p.route, page(p.view, p.permission), name=f"django_rqueue_{p.name}") for p in PAGES
        ]
