from django.apps import AppConfig


class JobsAppConfig(AppConfig):
    name = "tests.jobs_app"
    label = "jobs_app"
    default_auto_field = "django.db.models.BigAutoField"
