"""``manage.py demo_wait ID... --expect STATUS``: wait (bounded) until jobs finish."""

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_rqueue import JobStatus, get_job

FINAL = {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED}


class Command(BaseCommand):
    help = "Wait until every job is succeeded, failed or cancelled; fail if not as expected."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("ids", nargs="+")
        parser.add_argument("--expect", choices=[s.value for s in FINAL], default=None)
        parser.add_argument("--timeout", type=float, default=30.0, help="Seconds (default 30).")

    def handle(self, *args: Any, **options: Any) -> None:
        deadline = time.monotonic() + options["timeout"]
        for job_id in options["ids"]:
            while True:
                job = get_job(job_id)
                if job is None:
                    raise CommandError(f"unknown job {job_id}")
                if job.status in FINAL:
                    break
                if time.monotonic() > deadline:
                    raise CommandError(
                        f"timed out after {options['timeout']:g} s: {job_id} is {job.status}"
                    )
                time.sleep(0.05)
            if options["expect"] and job.status != options["expect"]:
                raise CommandError(f"{job_id} ended {job.status}, expected {options['expect']}")
            if options["verbosity"] > 1:
                self.stdout.write(f"{job_id} {job.status}")
