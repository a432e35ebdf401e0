"""The documentation's examples runner (tests.support.docs_pages) passes right examples and
fails wrong ones: a page of both is run by pytest in a subprocess, as ``pytest docs/`` would."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from .processes import REPO

CONFTEST = """\
from pathlib import Path
from tests.support.docs_pages import docs_database, docs_page, docs_redis_server, sybil
pytest_collect_file = sybil(Path(__file__).resolve().parent).pytest()
"""

PAGE = """\
# A page

```python
# settings.py
INSTALLED_APPS = [..., "django_rqueue"]
RQUEUE = {"REDIS_URL": "redis://localhost:6379/0", "QUEUES": {"default": {}, "mail": {}}}
```

```python
# shop/jobs.py
from django_rqueue import job

@job(queue="mail")
def greet(name: str) -> str:
    return f"hello {name}"
```

```python
from shop.jobs import greet
queued = greet.delay("ada")
```

% invisible-code-block: python
%
% work("mail")
% queued.refresh()
% assert queued.result == "hello ada", queued.result

```console
$ python manage.py rqueue_work --queues mail --burst
$ pip install "django-rqueue[webhooks,prometheus] @ git+https://example.org/django-rqueue"
```

```python
# settings.py
RQUEUE = {"QUEUES": {"default": {"no_such_key": 1}}}
```

```python
# settings.py
INSTALLED_APPS = [..., "no_such_app"]
```

```console
$ python manage.py rqueue_work --no-such-option
```

```console
$ pip install "django-rqueue[no_such_extra]"
```

```python
assert greet.delay("bob").status == "succeeded"
```

% skip: next "shown only"

```python
raise AssertionError("skipped")
```

```toml
[tool]
broken =
```

```python
from django.db import connection
assert "memory" in connection.settings_dict["NAME"]  # a test database, not the settings' file
```
"""

#: Page line -> whether its block must pass.
EXPECTED = {
    3: True,
    9: True,
    18: True,
    23: True,
    29: True,
    34: False,  # an unknown key of a queue: the system checks fail
    39: False,  # an app that is not installed
    44: False,  # an option rqueue_work does not have
    48: False,  # an extra pyproject.toml does not declare
    52: False,  # the job is queued, not run
    56: True,  # the skip instruction (the block after it is skipped)
    62: False,  # not TOML
    67: True,  # the page's database is a test database
}


def test_right_examples_pass_and_wrong_ones_fail(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "page.md").write_text(PAGE)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-c",
            str(REPO / "pyproject.toml"),
            "--rootdir",
            str(REPO),
            "-n",
            "0",
            "-rA",
            str(tmp_path),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    found = re.findall(r"^(PASSED|FAILED) \S*page\.md::line:(\d+)", run.stdout, re.M)
    outcomes = {int(line): verdict == "PASSED" for verdict, line in found}
    assert outcomes == EXPECTED, run.stdout[-4000:]
