"""``manage.py demo_report_order [--expect ROUNDS]``: print the order report jobs ran in."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from example_project.demo.store import REPORT_ORDER, demo_key, redis_client


def rounds(users: list[str]) -> str:
    """Group a run order into round-robin rounds: ``a b a`` -> ``"A B / A"``.

    A new round starts whenever a user comes up again within the current one.
    """
    out: list[list[str]] = []
    for user in users:
        if not out or user in out[-1]:
            out.append([])
        out[-1].append(user)
    return " / ".join(" ".join(u.upper() for u in r) for r in out)


class Command(BaseCommand):
    help = "Print the order in which build_report jobs ran, grouped into rounds."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--expect", default=None, help="Fail unless the rounds equal this.")

    def handle(self, *args: Any, **options: Any) -> None:
        entries = [str(e) for e in redis_client().lrange(demo_key(REPORT_ORDER), 0, -1)]
        runs = [entry.split() for entry in entries]
        users = [user for user, _ in runs]
        self.stdout.write(f"run order ({len(runs)} jobs): " + " ".join(f"{u}{n}" for u, n in runs))
        seen: dict[str, int] = {}
        for user, n in runs:
            if int(n) != seen.get(user, 0) + 1:
                raise CommandError(f"user {user}: report {n} ran out of FIFO order")
            seen[user] = int(n)
        order = rounds(users)
        self.stdout.write(f"rounds: {order}")
        if options["expect"] is not None and order != options["expect"]:
            raise CommandError(f"expected rounds {options['expect']}")
