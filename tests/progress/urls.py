"""The status view wired as a site would (``tests/progress/test_views.py``)."""

from django.http import HttpRequest
from django.urls import path

from django_rqueue.job import Job
from django_rqueue.views import job_status


def started_by_me(request: HttpRequest, job: Job[object]) -> bool:
    """A site's own rule: the job's metadata names the user who started it."""
    return request.user.is_authenticated and job.metadata.get("user") == request.user.get_username()


urlpatterns = [
    path("jobs/<str:job_id>/status/", job_status),
    path("mine/<str:job_id>/status/", job_status, {"permission": started_by_me}),
]
