"""``manage.py demo_enqueue reports|flaky|always_fails|welcome_task``: queue the demo's jobs
(``welcome_task``: a ``django.tasks`` task), print their ids."""

import uuid
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from example_project.demo.jobs import always_fails, enqueue_report, flaky
from example_project.demo.store import REPORT_ORDER, demo_key, redis_client
from example_project.demo.tasks import send_welcome_email

#: Reports per user for the round-robin demo: a=8, b=9, c=4, d=5, e=2.
DEFAULT_REPORTS = "a=8,b=9,c=4,d=5,e=2"


def parse_reports(spec: str) -> list[tuple[str, int]]:
    """``"a=8,b=9"`` -> ``[("a", 8), ("b", 9)]``."""
    pairs = []
    for item in spec.split(","):
        user, sep, count = item.partition("=")
        if not sep or not user.strip() or not count.strip().isdigit():
            raise CommandError(f"bad --reports item {item!r}; expected user=count")
        pairs.append((user.strip(), int(count)))
    return pairs


class Command(BaseCommand):
    help = "Queue demo jobs and print their ids, one per line."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("what", choices=["reports", "flaky", "always_fails", "welcome_task"])
        parser.add_argument(
            "--reports",
            default=DEFAULT_REPORTS,
            help=f"user=count,... for 'reports' (default {DEFAULT_REPORTS}).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        what = options["what"]
        if what == "reports":
            redis_client().delete(demo_key(REPORT_ORDER))
            for user, count in parse_reports(options["reports"]):
                for n in range(1, count + 1):
                    self.stdout.write(enqueue_report(user, n).id)
        elif what == "welcome_task":
            self.stdout.write(send_welcome_email.enqueue("bob@example.com").id)
        elif what == "flaky":
            self.stdout.write(flaky.delay(uuid.uuid4().hex).id)
        else:
            self.stdout.write(always_fails.delay().id)
