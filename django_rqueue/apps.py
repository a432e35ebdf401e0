from __future__ import annotations

from django.apps import AppConfig


class RqueueConfig(AppConfig):
    name = "django_rqueue"
    verbose_name = "Rqueue"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401 - registers the system checks
