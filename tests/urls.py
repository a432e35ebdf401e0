from django.contrib import admin
from django.urls import path

from tests.jobs_app.views import enqueue_async

urlpatterns = [
    path("admin/", admin.site.urls),
    path("enqueue-async/", enqueue_async),
]
