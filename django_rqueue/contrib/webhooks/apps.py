"""The webhooks app's configuration: on ready, it registers its system checks."""

from __future__ import annotations

from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    """The app ``django_rqueue.contrib.webhooks`` of ``INSTALLED_APPS``."""

    name = "django_rqueue.contrib.webhooks"
    label = "rqueue_webhooks"
    verbose_name = "Rqueue webhooks"

    def ready(self) -> None:
        """Register the webhooks' system check."""
        from . import checks  # noqa: F401 - registers the system check
