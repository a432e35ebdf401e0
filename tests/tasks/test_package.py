"""``django_rqueue.tasks`` is a package whose ``__init__`` imports nothing.

A tool that imports every installed app's ``tasks`` module (Celery's
autodiscovery, for one) then gets an empty module: it needs neither
``django.tasks`` nor its backport, and registers no backend.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import django_rqueue.tasks

REPO = Path(__file__).resolve().parents[2]


def test_the_package_init_has_no_import() -> None:
    source = Path(django_rqueue.tasks.__file__).read_text()
    found = [
        node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Import | ast.ImportFrom)
    ]
    assert found == []


def test_importing_the_package_loads_neither_the_tasks_api_nor_the_backend() -> None:
    script = (
        "import sys, django_rqueue.tasks; "
        "print(sorted(m for m in sys.modules if m.startswith(('django_rqueue.tasks.', "
        "'django.tasks', 'django_tasks'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.strip() == "[]"
