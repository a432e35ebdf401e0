"""What the management commands share: argparse types, logging set-up, plain-text tables,
and the base of the commands that switch a queue's state.

Commands import from here, never from each other.
"""

from __future__ import annotations

import argparse
import datetime
import logging
from collections.abc import Callable, Sequence
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_rqueue.display import printable
from django_rqueue.exceptions import RedisUnavailable
from django_rqueue.worker.weights import QueueSelection, parse_queues

# -- argparse types (their names appear in argparse's "invalid <name> value" errors) --


def positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {number}")
    return number


def seconds(value: str) -> float:
    number = float(value)
    if number < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0 seconds, got {value}")
    return number


def queue_list(value: str) -> list[str]:
    queues = [q.strip() for q in value.split(",") if q.strip()]
    if not queues:
        raise argparse.ArgumentTypeError("name at least one queue")
    return queues


def queue_selection(value: str) -> QueueSelection:
    """``a,b`` (strict order) or ``a:5,b:1`` (weighted): :mod:`django_rqueue.worker.weights`."""
    try:
        return parse_queues(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


# -- logging --


def configure_logging(verbosity: int) -> None:
    """Log ``django_rqueue`` to stderr unless the project already configured a handler."""
    logger = logging.getLogger("django_rqueue")
    logger.setLevel(logging.DEBUG if verbosity > 1 else logging.INFO)
    if not logger.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)s %(process)d %(name)s: %(message)s")
        )
        logger.addHandler(handler)


# -- aligned plain-text tables --


def cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return printable(str(value).replace("\n", " "))


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned columns separated by two spaces, one header line."""
    text = [[cell(v) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[n]) for r in text)]) for n, h in enumerate(headers)]
    lines = [
        "  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip()
        for line in [list(headers), *text]
    ]
    return "\n".join(lines)


# -- commands that switch one queue's state ------------------------------------------


class QueueSwitchCommand(BaseCommand):
    """``manage.py <command> <queue>``: apply :attr:`switch` to one declared queue.

    ``switch(queue)`` returns whether the state changed; the command prints
    :attr:`changed` or :attr:`unchanged` (each formatted with ``queue``).
    An undeclared queue or an unreachable Redis is a ``CommandError``.
    """

    #: The operation, ``switch(queue)``: whether it changed the queue's state.
    switch: Callable[[str], bool]
    #: What the command prints when the state changed.
    changed = ""
    #: What it prints when the queue was already in that state.
    unchanged = ""

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("queue", help="A queue declared in RQUEUE['QUEUES'].")

    def handle(self, *args: Any, **options: Any) -> None:
        queue: str = options["queue"]
        try:
            changed = type(self).switch(queue)
        except (ValueError, RedisUnavailable) as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write((self.changed if changed else self.unchanged).format(queue=queue))
