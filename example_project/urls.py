"""URLs of the example site."""

from django.contrib import admin
from django.urls import URLPattern, URLResolver, include, path
from django.views.generic import RedirectView

urlpatterns: list[URLPattern | URLResolver] = [
    path("", RedirectView.as_view(pattern_name="password_reset", permanent=False)),
    path("", include("example_project.demo.urls")),
    path("admin/", admin.site.urls),
]
