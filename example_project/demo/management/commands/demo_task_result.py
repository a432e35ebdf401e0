"""``manage.py demo_task_result ID --expect STATUS``: wait (bounded) for a task's result."""

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_rqueue.tasks_api import TaskResultStatus, default_task_backend


class Command(BaseCommand):
    help = "Wait until a django.tasks result is finished (get_result); print it."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("id")
        parser.add_argument("--expect", choices=["SUCCESSFUL", "FAILED"], default=None)
        parser.add_argument("--timeout", type=float, default=30.0, help="Seconds (default 30).")

    def handle(self, *args: Any, **options: Any) -> None:
        deadline = time.monotonic() + options["timeout"]
        result = default_task_backend.get_result(options["id"])
        while not result.is_finished:
            if time.monotonic() > deadline:
                raise CommandError(f"timed out after {options['timeout']:g} s: {result.status}")
            time.sleep(0.05)
            result.refresh()
        outcome = (
            f"return_value={result.return_value!r}"
            if result.status == TaskResultStatus.SUCCESSFUL
            else f"errors={[e.exception_class_path for e in result.errors]}"
        )
        self.stdout.write(f"{result.task.module_path}  {result.id}")
        self.stdout.write(
            f"  status={result.status}  attempts={result.attempts}  worker_ids={result.worker_ids}"
        )
        self.stdout.write(f"  {outcome}")
        if options["expect"] and result.status != options["expect"]:
            raise CommandError(f"{result.id} ended {result.status}, expected {options['expect']}")
