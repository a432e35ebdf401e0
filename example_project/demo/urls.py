from django.urls import URLPattern, path

from . import views

urlpatterns: list[URLPattern] = [
    path("password-reset/", views.password_reset, name="password_reset"),
    path(
        "password-reset/<str:token>/", views.password_reset_confirm, name="password_reset_confirm"
    ),
    path("jobs/<str:job_id>/", views.job_status, name="job_status"),
    path("check-site/", views.check_site, name="check_site"),
]
