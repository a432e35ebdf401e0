from django.contrib import admin
from django.urls import path

from django_rqueue.metrics import metrics_view
from tests.jobs_app.views import enqueue_async

urlpatterns = [
    path("admin/", admin.site.urls),
    path("enqueue-async/", enqueue_async),
    path("metrics/", metrics_view),
]
