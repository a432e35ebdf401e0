import os

from django.apps import AppConfig


class JobsAppConfig(AppConfig):
    name = "tests.jobs_app"
    label = "jobs_app"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        if os.environ.get("RQUEUE_TEST_OTEL_SPANS"):  # tests/contrib/opentelemetry
            from . import tracing  # noqa: F401 - connects its receivers
