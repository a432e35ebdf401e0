"""Where the ``django.tasks`` API comes from (:mod:`django_rqueue.tasks_api`), on every Django."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import django
import pytest

from django_rqueue import get_job, tasks_api
from tests.jobs_app.jobs import read_ledger
from tests.jobs_app.tasks import record_task

REPO = Path(__file__).resolve().parents[2]


def test_the_api_is_djangos_from_6_0_and_the_backports_on_5_2() -> None:
    expected = "django.tasks" if django.VERSION >= (6, 0) else "django_tasks"
    assert tasks_api.MODULE == expected
    assert type(record_task) is tasks_api.Task
    assert type(record_task).__module__.startswith(expected)
    assert tasks_api.ImmediateBackend.__module__ == f"{expected}.backends.immediate"


#: Run in a fresh interpreter: Django 5.2 without the django-tasks package, as far as
#: django-rqueue can tell (django.VERSION says 5.2, ``django_tasks`` cannot be imported).
WITHOUT_BACKPORT = textwrap.dedent(
    """
    import sys

    import django

    django.VERSION = (5, 2, 0, "final", 0)


    class HideBackport:
        def find_spec(self, name, path=None, target=None):
            if name == "django_tasks" or name.startswith("django_tasks."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None


    sys.meta_path.insert(0, HideBackport())
    django.setup()

    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import call_command

    from tests.jobs_app.jobs import record

    call_command("check")
    print("job", record.delay(sys.argv[1], "plain").id)
    try:
        import django_rqueue.backends  # noqa: F401
    except ImproperlyConfigured as exc:
        print("ImproperlyConfigured", exc)
    """
)


@pytest.mark.slow
def test_on_django_5_2_without_the_backport_the_app_works_and_the_backend_names_the_extra(
    ledger: str,
) -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_BACKPORT, ledger],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "System check identified no issues" in done.stdout, done.stdout
    [job_line] = [line for line in lines if line.startswith("job ")]
    job = get_job(job_line.split()[1])
    assert job is not None and job.args == [ledger, "plain"]
    [error] = [line for line in lines if line.startswith("ImproperlyConfigured ")]
    assert 'pip install "django-rqueue[tasks]"' in error
    assert "django-tasks package on Django 5.2" in error
    assert read_ledger(ledger) == []  # enqueued, not run
