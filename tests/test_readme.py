"""The README's quick start, run as its reader would: the code is read from README.md itself.

Its Python block holds three files (each starts with a ``# <path>`` comment): the settings
lines go into a new project's settings (``...`` is the project's own apps, the Redis URL
the test server's), ``myapp/jobs.py`` and ``myapp/views.py`` are written as they are. Then
``migrate``, the view called through a test client, ``rqueue_work --burst``, the job's
outcome, and the admin page the README names, each in its own process.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.support.docs_pages import check_command, command_lines
from tests.support.processes import REPO
from tests.support.redis_server import RedisServer

README = REPO / "README.md"
README_URL = "redis://localhost:6379/0"


def quick_start_files() -> dict[str, str]:
    """``path -> text`` of the files in the quick start's Python block."""
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    files: dict[str, list[str]] = {}
    current: list[str] = []
    for line in block.splitlines():
        if match := re.fullmatch(r"# ([\w/]+\.py)", line):
            current = files.setdefault(match.group(1), [])
        else:
            current.append(line)
    return {path: "\n".join(lines).strip() + "\n" for path, lines in files.items()}


def test_the_quick_start_block_names_the_three_files() -> None:
    assert sorted(quick_start_files()) == ["myapp/jobs.py", "myapp/views.py", "settings.py"]


SETTINGS = """\
SECRET_KEY = "readme-test"
DEBUG = True
ALLOWED_HOSTS = ["testserver"]
ROOT_URLCONF = "urls"
DATABASES = {{"default": {{"ENGINE": "django.db.backends.sqlite3", "NAME": {db!r}}}}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [
    {{
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {{"context_processors": [
            "django.template.context_processors.request",
            "django.contrib.auth.context_processors.auth",
            "django.contrib.messages.context_processors.messages",
        ]}},
    }}
]
"""

URLS = """\
from django.contrib import admin
from django.urls import path

from myapp.views import signup

urlpatterns = [path("admin/", admin.site.urls), path("signup/", signup)]
"""

PROJECT_APPS = (
    '"django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes", '
    '"django.contrib.sessions", "django.contrib.messages"'
)

CALL_THE_VIEW = """\
import django; django.setup()
from django.test import Client
print(Client().get("/signup/").json()["job"])
"""

SHOW_THE_JOB = """\
import sys, django; django.setup()
from django.contrib.auth.models import User
from django.test import Client
from django_rqueue import get_job
job = get_job(sys.argv[1])
print(job.status.value, job.result)
admin = User.objects.create_superuser("admin", "admin@example.com", "pw")
client = Client()
client.force_login(admin)
print(client.get("/admin/django_rqueue/dashboard/").status_code)
"""


@pytest.mark.slow
def test_the_quick_start_runs(tmp_path: Path, redis_server: RedisServer) -> None:
    files = quick_start_files()
    settings = files.pop("settings.py")
    assert "..." in settings and README_URL in settings
    settings = settings.replace("...", PROJECT_APPS).replace(README_URL, redis_server.url)
    (tmp_path / "settings.py").write_text(
        SETTINGS.format(db=str(tmp_path / "db.sqlite3")) + settings
    )
    (tmp_path / "urls.py").write_text(URLS)
    (tmp_path / "myapp").mkdir()
    (tmp_path / "myapp" / "__init__.py").write_text("")
    for path, text in files.items():
        (tmp_path / path).write_text(text)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "settings",
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)]),
    }

    def run(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, *args],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    run("-m", "django", "migrate", "-v", "0")
    job_id = run("-c", CALL_THE_VIEW).strip()
    assert job_id.startswith("default:")
    run("-m", "django", "rqueue_work", "--burst", "--concurrency", "1")
    outcome, admin_status = run("-c", SHOW_THE_JOB, job_id).splitlines()
    assert outcome == "succeeded welcome mail for user 42"
    assert admin_status == "200"


def test_the_install_line_names_declared_extras_and_the_projects_url() -> None:
    """The README's commands are checked as the documentation's are (tests.support.docs_pages):
    ``pip install`` names only extras pyproject.toml declares, from the project's own URL."""
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"```console\n(.*?)```", text, flags=re.DOTALL)
    lines = [line for block in blocks for line in command_lines(block)]
    installs = [line for line in lines if line.startswith("pip install")]
    assert installs, "no pip install line"
    for line in lines:
        check_command(shlex.split(line))
    urls = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["urls"]
    assert all(f"git+{urls['Source']}" in line for line in installs), (installs, urls)
