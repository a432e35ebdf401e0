"""``manage.py demo_show ID...``: print jobs as ``get_job`` sees them."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_rqueue import Job, JobStatus, get_job


def describe(job: Job[Any], *, traceback_lines: int) -> list[str]:
    """Human-readable lines about ``job``."""
    lines = [
        f"{job.name}  {job.id}",
        f"  status={job.status}  attempts={job.attempts}/{job.max_attempts}  result={job.result!r}",
    ]
    for number, error in enumerate(job.errors, start=1):
        lines.append(f"  error of attempt {number}: {error['type']}: {error['message']}")
    if job.status == JobStatus.FAILED and job.error is not None and traceback_lines:
        tail = job.error["traceback"].rstrip().splitlines()[-traceback_lines:]
        lines.append("  last traceback (tail):")
        lines.extend(f"    {line}" for line in tail)
    return lines


class Command(BaseCommand):
    help = "Show status, attempts, result and errors of jobs (via get_job)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("ids", nargs="+")
        parser.add_argument(
            "--traceback-lines", type=int, default=3, help="Traceback lines to show (0: none)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        for job_id in options["ids"]:
            job = get_job(job_id)
            if job is None:
                raise CommandError(f"unknown job {job_id}")
            for line in describe(job, traceback_lines=options["traceback_lines"]):
                self.stdout.write(line)
