"""``manage.py demo_submit_reset BASE_URL EMAIL``: use the reset form over real HTTP.

GETs the form (for the CSRF cookie and token), POSTs it, reads the queued
job's id from the answer, then polls ``/jobs/<id>/`` until the job is
finished. Fails unless it succeeded within ``--timeout`` seconds.
"""

import http.cookiejar
import json
import re
import time
import urllib.parse
import urllib.request
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

CSRF_FIELD = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
JOB_ID = re.compile(r'data-job-id="([^"]+)"')


class Command(BaseCommand):
    help = "Submit the password-reset form over HTTP and wait for its job."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("base_url", help="e.g. http://127.0.0.1:8000")
        parser.add_argument("email")
        parser.add_argument("--timeout", type=float, default=30.0, help="Seconds (default 30).")

    def handle(self, *args: Any, **options: Any) -> None:
        base = options["base_url"].rstrip("/")
        if urllib.parse.urlsplit(base).scheme not in ("http", "https"):
            raise CommandError("base_url must be an http(s) URL")
        opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )

        def fetch(path: str, data: dict[str, str] | None = None) -> str:
            body = urllib.parse.urlencode(data).encode() if data is not None else None
            request = urllib.request.Request(f"{base}{path}", data=body)  # noqa: S310
            with opener.open(request, timeout=10) as response:
                text: str = response.read().decode()
                self.stdout.write(f"{request.get_method()} {path} -> {response.status}")
                return text

        form = fetch("/password-reset/")
        token = CSRF_FIELD.search(form)
        if token is None:
            raise CommandError("no CSRF token in the form")
        answer = fetch(
            "/password-reset/",
            {"csrfmiddlewaretoken": token.group(1), "email": options["email"]},
        )
        found = JOB_ID.search(answer)
        if found is None:
            raise CommandError("the answer names no job:\n" + answer)
        job_id = found.group(1)
        self.stdout.write(f"queued job {job_id}")
        deadline = time.monotonic() + options["timeout"]
        while True:
            status = json.loads(fetch_quietly(opener, f"{base}/jobs/{job_id}/"))
            if status["status"] in ("succeeded", "failed", "cancelled"):
                break
            if time.monotonic() > deadline:
                raise CommandError(f"timed out; job {job_id} is {status['status']}")
            time.sleep(0.05)
        self.stdout.write(f"GET /jobs/{job_id}/ -> {json.dumps(status)}")
        if status["status"] != "succeeded":
            raise CommandError(f"job {job_id} ended {status['status']}")


def fetch_quietly(opener: urllib.request.OpenerDirector, url: str) -> str:
    with opener.open(url, timeout=10) as response:
        text: str = response.read().decode()
        return text
