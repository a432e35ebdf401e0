from django.apps import AppConfig


class DemoConfig(AppConfig):
    name = "example_project.demo"
    label = "demo"
    verbose_name = "django-rqueue demo"
