"""Settings of the example site.

Environment variables (all optional):

- ``REDIS_URL``: Redis used by django-rqueue (default ``redis://127.0.0.1:6379/0``).
- ``RQUEUE_KEY_PREFIX``: prefix of every django-rqueue key (default ``rqueue``).
- ``EMAIL_FILE_PATH``: directory the file-based email backend writes to
  (default ``example_project/sent_emails``).
- ``DEMO_DB_PATH``: the SQLite database (default ``example_project/db.sqlite3``).
- ``DJANGO_SECRET_KEY``, ``DJANGO_DEBUG`` (``1``/``0``).
"""

import os
from pathlib import Path
from typing import Any

BASE_DIR = Path(__file__).resolve().parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "example-project-insecure-dev-key")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_rqueue",
    "example_project.demo",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "example_project.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("DEMO_DB_PATH", str(BASE_DIR / "db.sqlite3")),
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

USE_TZ = True
TIME_ZONE = "UTC"
LANGUAGE_CODE = "en-us"
STATIC_URL = "/static/"

EMAIL_BACKEND = "django.core.mail.backends.filebased.EmailBackend"
EMAIL_FILE_PATH = os.environ.get("EMAIL_FILE_PATH", str(BASE_DIR / "sent_emails"))
DEFAULT_FROM_EMAIL = "no-reply@example.com"

RQUEUE: dict[str, Any] = {
    "REDIS_URL": os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"),
    "KEY_PREFIX": os.environ.get("RQUEUE_KEY_PREFIX", "rqueue"),
    "QUEUES": {
        "default": {},
        "emails": {"timeout": 30, "max_attempts": 5},
        "reports": {"timeout": 120},
    },
    "LEASE": 30,
}

# django.tasks (demo/tasks.py) on the same queues and workers.
TASKS: dict[str, Any] = {"default": {"BACKEND": "django_rqueue.backends.RQueueBackend"}}
