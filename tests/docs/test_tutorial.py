"""The tutorial (docs/tutorial/), followed as its reader would, from the page itself.

The pages are read in their toctree's order, block by block, and each block is done as the
reader does it:

- ``console``: ``django-admin`` and ``python manage.py`` lines run in a new project folder
  (``runserver`` and ``rqueue_work`` as background processes: a new ``rqueue_work`` stops
  the one before with SIGINT, the reader's Ctrl-C; ``createsuperuser`` without its
  prompts), ``curl`` is a GET to that ``runserver``, ``redis-cli ping`` a PING to the
  test's redis-server. The lines that set up the machine (venv, pip, apt, brew, docker)
  are checked, not run. The output lines a command shows must be what it printed.
- ``python``: ``# settings.py`` lines go into the project's settings (``...`` is what
  ``startproject`` wrote), a ``# <path>.py`` block is written as that file, as the reader
  copies it (with that comment), ``>>>`` blocks run in ``manage.py shell``.
- Prose: what a paragraph says to add to the settings on the running Django's version.
- ``text``: what the worker's terminal shows next: each line must appear in its output.
- A paragraph telling the reader to click **Retry**, then **Yes, retry** is done in the
  admin, over HTTP, as the superuser the page created; every admin label the page names in
  bold must be on the admin pages visited.

What varies from run to run (times, process ids, the job ids the reader's ``curl`` printed,
durations and backoff delays) is matched by pattern; all the rest is literal, so a wrong
line on the page fails the test.
"""

from __future__ import annotations

import doctest
import html
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.cookiejar import CookieJar
from pathlib import Path
from urllib.parse import urlencode, urljoin
from urllib.request import HTTPCookieProcessor, Request, build_opener

import django
import pytest

from tests.support.processes import REPO, kill_tree
from tests.support.redis_server import RedisServer, free_port
from tests.support.waiting import wait_until

TUTORIAL = REPO / "docs" / "tutorial"
#: Seconds a step may take: a worker's start, a job's retries (backoff up to 2 + 4 s).
DEADLINE = 60.0
#: What the reader types at createsuperuser's prompts.
ADMIN_USER, ADMIN_PASSWORD = "admin", "tutorial-pass-7"


@dataclass
class Block:
    """A fenced code block of a page, with the prose since the block before it."""

    page: str
    line: int
    language: str
    text: str
    prose: str


def toctree_pages() -> list[Path]:
    """The tutorial's pages, in the order of the toctree of its index."""
    index = (TUTORIAL / "index.md").read_text(encoding="utf-8")
    (toctree,) = re.findall(r"```\{toctree\}\n(.*?)```", index, re.S)
    names = [n.strip() for n in toctree.splitlines() if n.strip() and not n.startswith(":")]
    return [TUTORIAL / f"{name}.md" for name in names]


def page_blocks(path: Path) -> Iterator[Block]:
    text = path.read_text(encoding="utf-8")
    previous_end = 0
    for match in re.finditer(r"^```(\w+)\n(.*?)^```$", text, re.S | re.M):
        line = text.count("\n", 0, match.start()) + 1
        prose = text[previous_end : match.start()]
        yield Block(path.name, line, match.group(1), match.group(2), prose)
        previous_end = match.end()


def blocks() -> list[Block]:
    return [b for page in toctree_pages() for b in page_blocks(page)]


def bold(prose: str) -> list[str]:
    return re.findall(r"\*\*(.+?)\*\*", prose)


def test_the_tutorial_has_two_parts_and_names_the_project_url() -> None:
    assert [p.name for p in toctree_pages()] == ["first-job.md", "failures.md"]
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    url = pyproject["project"]["urls"]["Source"]
    installs = [b for b in blocks() if "pip install" in b.text]
    assert [f'pip install "django-rqueue @ git+{url}"' in b.text for b in installs] == [True]


# ---------------------------------------------------------------- matching output --

#: What varies in an output line, and the pattern that matches it in any run's output
#: (a function of the match). The rest of the line is matched literally.
VARYING: list[tuple[str, Callable[[re.Match[str]], str]]] = [
    (r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(,\d{3})?", lambda m: r"\S+ \S+"),  # a time
    (r"(INFO|WARNING|ERROR) \d+ ", lambda m: m.group(1) + r" \d+ "),  # a level, a pid
    (r"[\w.-]+:\d+:[0-9a-f]{6}(/\d+)?", lambda m: r"\S+:\d+:[0-9a-f]{6}(/\d+)?"),  # a worker
    (r"\d+ child\(ren\)", lambda m: r"\d+ child\(ren\)"),  # one per CPU
    (r"duration_ms=\d+", lambda m: r"duration_ms=\d+"),
    (r"retry_in=\d+\.\ds", lambda m: r"retry_in=\d+\.\ds"),
    # django-rqueue's own lines in a traceback; the reader's folder.
    (
        r'File "[^"]*/django_rqueue/(\w+)\.py", line \d+',
        lambda m: rf'File "\S*/django_rqueue/{m.group(1)}\.py", line \d+',
    ),
    (r'File "[^"]*/shop/', lambda m: r'File "\S*/shop/'),
    (r" {2,}", lambda m: r"\s+"),  # a table's padding
]
_VARYING = re.compile("|".join(f"({v})" for v, _ in VARYING))


def line_pattern(shown: str, ids: dict[str, str]) -> re.Pattern[str]:
    """A pattern of the output line ``shown``: literal but for :data:`VARYING`, with the
    job ids the page's ``curl`` lines printed replaced by those of this run."""
    for page_id, real_id in ids.items():
        shown = shown.replace(page_id, real_id)
    shown = shown.strip()
    parts, done = [], 0
    for match in _VARYING.finditer(shown):
        parts.append(re.escape(shown[done : match.start()]))
        for pattern, replace in VARYING:
            varying = re.fullmatch(pattern, match.group(0))
            if varying:
                parts.append(replace(varying))
                break
        done = match.end()
    parts.append(re.escape(shown[done:]))
    return re.compile("".join(parts))


def missing_lines(shown: list[str], output: str, ids: dict[str, str]) -> list[str]:
    lines = [line.strip() for line in output.splitlines()]
    return [s for s in shown if not any(line_pattern(s, ids).fullmatch(line) for line in lines)]


# ------------------------------------------------------------------- the project --


@dataclass
class Reader:
    """The reader's project folder and what runs in their terminals."""

    folder: Path
    redis: RedisServer
    env: dict[str, str]
    port: int = field(default_factory=free_port)
    server: subprocess.Popen[bytes] | None = None
    worker: subprocess.Popen[bytes] | None = None
    workers: int = 0
    #: Job ids the page's curl lines show -> those of this run; order number -> job id.
    ids: dict[str, str] = field(default_factory=dict)
    orders: dict[int, str] = field(default_factory=dict)
    #: When the code last changed, and when the running worker started (counters).
    changes: int = 0
    worker_started_at: int = -1
    admin_pages: list[str] = field(default_factory=list)

    def manage(self, *args: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=self.folder,
            env=self.env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=DEADLINE,
            check=False,
        )
        assert done.returncode == 0, f"manage.py {' '.join(args)}:\n{done.stdout}{done.stderr}"
        return done.stdout + done.stderr

    def background(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        with (self.folder / f"{name}.log").open("ab") as log:
            return subprocess.Popen(
                [sys.executable, "manage.py", *args],
                cwd=self.folder,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def worker_output(self) -> str:
        return (self.folder / f"worker-{self.workers}.log").read_text(errors="replace")

    def start_worker(self) -> None:
        self.stop_worker()
        self.workers += 1
        self.worker = self.background(f"worker-{self.workers}", "rqueue_work")
        self.worker_started_at = self.changes

    def stop_worker(self) -> None:
        """Ctrl-C: the worker finishes what it runs and exits cleanly."""
        if self.worker is not None:
            self.worker.send_signal(signal.SIGINT)
            assert self.worker.wait(DEADLINE) == 0, self.worker_output()
            self.worker = None

    def start_server(self) -> None:
        self.server = self.background(
            "runserver", "runserver", f"127.0.0.1:{self.port}", "--noreload"
        )

        def listening() -> bool:
            with socket.socket() as sock:
                return sock.connect_ex(("127.0.0.1", self.port)) == 0

        wait_until(listening, timeout=DEADLINE, message="runserver does not listen")

    def url(self, shown: str) -> str:
        return shown.replace("127.0.0.1:8000", f"127.0.0.1:{self.port}")

    def close(self) -> None:
        for process in (self.worker, self.server):
            if process is not None and process.poll() is None:
                kill_tree(process.pid)
                process.wait(10)

    def wait_for_worker_lines(self, shown: list[str]) -> None:
        assert self.worker is not None, "the page shows a worker's output, but runs none"
        try:
            wait_until(
                lambda: not missing_lines(shown, self.worker_output(), self.ids),
                timeout=DEADLINE,
            )
        except AssertionError:
            missing = missing_lines(shown, self.worker_output(), self.ids)
            raise AssertionError(
                f"the worker did not print {missing}\n--- it printed ---\n{self.worker_output()}"
            ) from None


# ----------------------------------------------------------- what each block does --


def do_console(reader: Reader, block: Block) -> None:
    commands: list[tuple[str, list[str]]] = []
    for line in block.text.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:].split("  #")[0].strip(), []))
        else:
            assert commands, f"{block.page}:{block.line}: output before any command"
            commands[-1][1].append(line)
    for command, output in commands:
        run_command(reader, block, command, [o for o in output if o.strip()])


def run_command(reader: Reader, block: Block, command: str, shown: list[str]) -> None:
    where = f"{block.page}:{block.line}: {command}"
    words = command.split()
    if words[0] in ("mkdir", "cd", "source", "sudo", "brew", "docker") or words[:3] == [
        "python3",
        "-m",
        "venv",
    ]:
        assert not shown, where  # the machine's set-up: done by the test's own venv and Redis
    elif words[:2] == ["pip", "install"]:
        assert not shown, where  # the package under test is the working tree (PYTHONPATH)
    elif words == ["redis-cli", "ping"]:
        assert shown == ["PONG"] and reader.redis.ping(), where
    elif words[0] == "django-admin":
        django_admin = Path(sys.executable).with_name("django-admin")
        subprocess.run(
            [str(django_admin), *words[1:]], cwd=reader.folder, env=reader.env, check=True
        )
    elif words[0] == "curl":
        assert len(words) == 2 and len(shown) == 1, where
        check_code_is_running(reader, where)
        got = json.loads(http_get(reader.url(words[1])))
        expected = json.loads(shown[0])
        assert got.keys() == expected.keys() and got["order"] == expected["order"], (got, where)
        assert re.fullmatch(r"default:[\w-]{22}", got["job"]), got
        reader.ids[expected["job"]] = got["job"]
        reader.orders[got["order"]] = got["job"]
    elif words[:2] == ["python", "manage.py"]:
        run_manage(reader, where, words[2:], shown)
    else:
        raise AssertionError(f"{where}: the test does not know this command")


def run_manage(reader: Reader, where: str, args: list[str], shown: list[str]) -> None:
    if args == ["runserver"]:
        assert not shown, where
        reader.start_server()
    elif args == ["rqueue_work"]:
        reader.start_worker()
        reader.wait_for_worker_lines(shown)
    elif args == ["createsuperuser"]:  # the prompts' answers, as options
        reader.manage(
            "createsuperuser", "--noinput", "--username", ADMIN_USER, "--email", "you@example.com"
        )
    else:
        output = reader.manage(*args)
        missing = missing_lines(shown, output, reader.ids)
        assert not missing, f"{where}: {missing} not in\n{output}"


def do_python(reader: Reader, block: Block) -> None:
    first, _, rest = block.text.partition("\n")
    if first.startswith(">>>"):
        run_in_shell(reader, block)
    elif first == "# settings.py":
        add_settings(reader, rest)
    elif match := re.fullmatch(r"# ((?:\w+/)+\w+\.py)", first):
        (reader.folder / match.group(1)).write_text(block.text)  # as copied, with its name
        reader.changes += 1
    else:
        raise AssertionError(f"{block.page}:{block.line}: a Python block the reader cannot place")


def add_settings(reader: Reader, fragment: str) -> None:
    """Put a settings fragment into mysite/settings.py as its reader does."""
    path = reader.folder / "mysite" / "settings.py"
    settings = path.read_text()
    fragment = fragment.replace("redis://localhost:6379/0", reader.redis.url)
    match = re.fullmatch(r"(\w+) = \[\n    \.\.\.,\n(.*)\]\n", fragment, re.S)
    if match:  # "[..., new items]": add them at the end of the list startproject wrote
        name, items = match.groups()
        start = settings.index(f"\n{name} = [\n")
        end = settings.index("\n]\n", start)
        settings = settings[:end] + "\n" + items.rstrip("\n") + settings[end:]
    else:
        assert "..." not in fragment, fragment
        settings += "\n" + fragment
    path.write_text(settings)
    reader.changes += 1


def follow_version_notes(reader: Reader, prose: str) -> None:
    """Do what a paragraph says to add to the settings on the running Django's version
    ("On Django 6.0 or 5.2, add `EMAIL_BACKEND = ...`")."""
    running = "{}.{}".format(*django.VERSION[:2])
    for versions, line in re.findall(
        r"On Django ([\d.]+(?:(?:, | or )[\d.]+)*),\s+add\s+`(\w+ = [^`]+)`", prose
    ):
        if running in re.split(r", | or ", versions):
            add_settings(reader, line + "\n")


SHELL = """\
import doctest, sys
test = doctest.DocTestParser().get_doctest({text!r}, {{}}, "tutorial", None, 0)
runner = doctest.DocTestRunner()
runner.run(test)
sys.exit(1 if runner.failures else 0)
"""


def run_in_shell(reader: Reader, block: Block) -> None:
    text = block.text
    for page_id, real_id in reader.ids.items():
        text = text.replace(page_id, real_id)
    assert doctest.DocTestParser().get_examples(text), block
    reader.manage("shell", "-c", SHELL.format(text=text))


def do_text(reader: Reader, block: Block) -> None:
    if "**Retry**" in block.prose:
        retry_in_the_admin(reader, block)
    check_code_is_running(reader, f"{block.page}:{block.line}")
    reader.wait_for_worker_lines([line for line in block.text.splitlines() if line.strip()])


def check_code_is_running(reader: Reader, where: str) -> None:
    assert reader.worker_started_at == reader.changes, (
        f"{where}: the code changed since the worker started, and the page did not restart it"
    )


# --------------------------------------------------------------------- the admin --


class Browser:
    """Cookies and CSRF, as a browser keeps them, over urllib."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.cookies = CookieJar()
        self.opener = build_opener(HTTPCookieProcessor(self.cookies))

    def get(self, url: str) -> str:
        with self.opener.open(urljoin(self.base, url), timeout=DEADLINE) as response:
            page: str = response.read().decode()
        return page

    def post(self, url: str, data: dict[str, str]) -> str:
        token = next(c.value for c in self.cookies if c.name == "csrftoken")
        body = urlencode({**data, "csrfmiddlewaretoken": token or ""}).encode()
        request = Request(  # noqa: S310 - http:// to the test's runserver
            urljoin(self.base, url), data=body, headers={"Referer": self.base}
        )
        with self.opener.open(request, timeout=DEADLINE) as response:
            page: str = response.read().decode()
        return page


def link(page: str, label: str) -> str:
    """The href of the link whose text is ``label``."""
    found = re.findall(rf'<a [^>]*href="([^"]+)"[^>]*>\s*{re.escape(label)}\s*</a>', page)
    assert found, f"no link {label!r}"
    return html.unescape(found[0])


def retry_in_the_admin(reader: Reader, block: Block) -> None:
    """Log in, open the failed job of the order the paragraph names, retry it."""
    (order,) = re.findall(r"failed job of order (\d+)", block.prose)
    job_id = reader.orders[int(order)]
    browser = Browser(f"http://127.0.0.1:{reader.port}/")
    browser.get("/admin/login/")
    index = browser.post(
        "/admin/login/?next=/admin/",
        {"username": ADMIN_USER, "password": ADMIN_PASSWORD, "next": "/admin/"},
    )
    overview = browser.get(link(index, "Queues and jobs"))
    failed_list = browser.get(re.findall(r'href="([^"]*queues/default/failed/)"', overview)[0])
    job_page = browser.get(link(failed_list, job_id))
    assert "ConnectionError: the mail server is down" in job_page
    assert job_page.count("Traceback (most recent call last)") == 3
    confirm = browser.get(link(job_page, "Retry"))
    form = re.search(r'<form method="post" action="([^"]+)">', confirm)
    assert form and '<input type="submit" value="Yes, retry">' in confirm, confirm
    browser.post(html.unescape(form.group(1)), {})
    reader.admin_pages += [index, overview, failed_list, job_page, confirm]


def http_get(url: str) -> str:
    with build_opener().open(url, timeout=DEADLINE) as response:
        body: str = response.read().decode()
    return body


# ---------------------------------------------------------------------- the test --


@pytest.mark.slow
def test_the_tutorial_as_its_reader_follows_it(tmp_path: Path, redis_server: RedisServer) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "RQUEUE_"))}
    env.update(
        PYTHONPATH=str(REPO),  # django_rqueue from this working tree
        PYTHONUNBUFFERED="1",
        DJANGO_SUPERUSER_PASSWORD=ADMIN_PASSWORD,
    )
    reader = Reader(tmp_path, redis_server, env)
    admin_labels: list[str] = []
    try:
        for block in blocks():
            follow_version_notes(reader, block.prose)
            if "/admin/" in block.prose or "**Retry" in block.prose:  # the admin's paragraphs
                admin_labels += bold(block.prose)
            {"console": do_console, "python": do_python, "text": do_text}[block.language](
                reader, block
            )
        reader.stop_worker()
    finally:
        reader.close()

    assert reader.workers == 4 and reader.admin_pages, "the page's steps were not all taken"
    admin = "\n".join(html.unescape(p) for p in reader.admin_pages)
    missing = [label for label in admin_labels if label not in admin]
    assert not missing, f"the page names admin labels the admin does not show: {missing}"
