"""The Django settings the documentation is built with: enough for autodoc to import
django-rqueue (its models, admin and commands); nothing connects to Redis."""

SECRET_KEY = "django-rqueue-docs-not-a-secret"  # noqa: S105 - never serves a request
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django_rqueue",
    "django_rqueue.contrib.webhooks",
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
USE_TZ = True
RQUEUE = {"REDIS_URL": "redis://localhost:6379/0"}
