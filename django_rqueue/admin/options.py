"""The ``ModelAdmin`` that mounts the rqueue pages in the Django admin."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path

from ..models import Dashboard
from . import actions, detail, lists, overview, schedules
from .common import require

View = Callable[..., HttpResponse]

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
            path("", page(overview.overview), name="django_rqueue_dashboard_changelist"),
            path("schedules/", page(schedules.schedule_list), name="django_rqueue_schedules"),
            path("failed/", page(lists.failed_all), name="django_rqueue_failed_all"),
            path(
                "failed/selected/",
                page(actions.selected, None),
                name="django_rqueue_failed_selected",
            ),
            path(
                "schedules/<str:entry>/<str:action>/",
                page(schedules.schedule_action, None),
                name="django_rqueue_schedule_action",
            ),
            path(
                "queues/<str:queue>/failed/<str:action>-all/",
                page(actions.all_failed, None),
                name="django_rqueue_all_failed",
            ),
            path(
                "queues/<str:queue>/<str:action>-queue/",
                page(actions.queue_action, None),
                name="django_rqueue_queue_action",
            ),
            path(
                "queues/<str:queue>/empty/",
                page(actions.empty_queue, None),
                name="django_rqueue_empty_queue",
            ),
            path(
                "queues/<str:queue>/selected/",
                page(actions.selected, None),
                name="django_rqueue_selected",
            ),
            path(
                "queues/<str:queue>/<str:state>/",
                page(lists.job_list),
                name="django_rqueue_job_list",
            ),
            path("jobs/<str:job_id>/", page(detail.job_detail), name="django_rqueue_job_change"),
            path(
                "jobs/<str:job_id>/<str:action>/",
                page(actions.job_action, None),
                name="django_rqueue_job_action",
            ),
        ]
