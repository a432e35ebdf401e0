"""``manage.py rqueue_failed list|show|retry|delete``: the failed store from a shell."""

from __future__ import annotations

import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_rqueue.conf import get_config
from django_rqueue.display import printable, shown_arguments
from django_rqueue.engine.calls import FailedBatchMode
from django_rqueue.exceptions import RedisUnavailable
from django_rqueue.job import Job, JobStatus, get_job
from django_rqueue.management.base import table
from django_rqueue.ops import operations
from django_rqueue.ops.listings import JobSource, filtered_page
from django_rqueue.ops.operations import JobAction


def _error(job: Job[Any] | None) -> str:
    if job is None or not job.error:
        return ""
    return f"{job.error['type'].rsplit('.', 1)[-1]}: {job.error['message']}"[:80]


def _job_dict(job: Job[Any]) -> dict[str, Any]:
    args, kwargs = shown_arguments(job)  # sensitive values hidden
    return {
        "id": job.id,
        "name": job.name,
        "queue": job.queue,
        "status": job.status.value,
        "priority": job.priority,
        "group": job.group,
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "args": args,
        "kwargs": kwargs,
        "enqueued_at": job.enqueued_at,
        "finished_at": job.finished_at,
        "error": job.error,
        "errors": job.errors,
        "problems": job.problems,
    }


class Command(BaseCommand):
    """The ``rqueue_failed`` command, with its subcommands."""

    help = "List, show, retry or delete failed jobs."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True, metavar="list|show|retry|delete")
        listing = sub.add_parser("list", help="List failed jobs, newest first.")
        listing.add_argument("--limit", type=int, default=50, help="At most this many per queue.")
        show = sub.add_parser("show", help="Show failed jobs with their tracebacks.")
        show.add_argument("ids", nargs="+", metavar="JOB_ID")
        for name in ("retry", "delete"):
            act = sub.add_parser(name, help=f"{name.capitalize()} failed jobs.")
            act.add_argument("ids", nargs="*", metavar="JOB_ID")
            act.add_argument(
                "--all", action="store_true", help="Every failed job (of --queue, --name)."
            )
            act.add_argument("--yes", action="store_true", help="Do not ask for confirmation.")
        for each in sub.choices.values():
            each.add_argument("--json", action="store_true", help="Machine-readable output.")
            if each is not show:
                each.add_argument("--queue", action="append", help="Only this queue (repeatable).")
                each.add_argument("--name", default="", help="Only jobs with this job name.")

    def handle(self, *args: Any, **options: Any) -> None:
        actions = {
            "list": self.do_list,
            "show": self.do_show,
            "retry": self.do_retry,
            "delete": self.do_delete,
        }
        try:
            actions[options["action"]](options)
        except RedisUnavailable as exc:
            raise CommandError(str(exc)) from exc

    def queues(self, options: dict[str, Any]) -> list[str]:
        declared = list(get_config().queues)
        chosen = options.get("queue") or declared
        unknown = [q for q in chosen if q not in declared]
        if unknown:
            raise CommandError(f"unknown queue(s): {', '.join(unknown)}")
        return list(chosen)

    def emit_json(self, value: object) -> None:
        self.stdout.write(json.dumps(value, indent=2, default=str))

    def do_list(self, options: dict[str, Any]) -> None:
        rows, totals = [], {}
        for queue in self.queues(options):
            source = JobSource(queue, JobStatus.FAILED)
            totals[queue] = source.count()
            if options["name"]:
                found = filtered_page(source, options["name"], 0, options["limit"]).rows
            else:
                found = source[0 : options["limit"]]
            rows += found
        if options["json"]:
            self.emit_json(
                {
                    "totals": totals,
                    "jobs": [
                        {"failed_at": r.at, **_job_dict(r.job)} for r in rows if r.job is not None
                    ],
                }
            )
            return
        self.stdout.write(
            table(
                ["ID", "NAME", "FAILED AT (UTC)", "ATTEMPTS", "ERROR"],
                [
                    [
                        r.id,
                        r.job.name if r.job else "(record gone)",
                        r.at,
                        f"{r.job.attempts}/{r.job.max_attempts}" if r.job else "",
                        _error(r.job),
                    ]
                    for r in rows
                ],
            )
        )
        summary = ", ".join(f"{q}: {n}" for q, n in totals.items())
        self.stdout.write(f"\nfailed jobs per queue: {summary}")

    def do_show(self, options: dict[str, Any]) -> None:
        jobs = []
        for job_id in options["ids"]:
            job = get_job(job_id)
            if job is None:
                raise CommandError(f"no job {job_id!r}")
            jobs.append(job)
        if options["json"]:
            self.emit_json([_job_dict(j) for j in jobs])
            return
        for job in jobs:
            # Job data is escaped (printable): it may carry terminal control sequences.
            self.stdout.write(f"{job.id}  {printable(job.name)}  status={job.status.value}")
            self.stdout.write(f"  queue={job.queue} priority={job.priority} group={job.group!r}")
            self.stdout.write(f"  attempts={job.attempts}/{job.max_attempts}")
            args, kwargs = shown_arguments(job)  # sensitive values hidden
            self.stdout.write(f"  args={json.dumps(args, default=str)}")
            self.stdout.write(f"  kwargs={json.dumps(kwargs, default=str)}")
            for problem in job.problems:
                self.stdout.write(f"  PROBLEM: {printable(problem)}")
            for n, error in enumerate(job.errors, 1):
                error_type, message = printable(error["type"]), printable(error["message"])
                self.stdout.write(f"  --- attempt {n}: {error_type}: {message}")
                traceback = printable(error["traceback"].rstrip(), lines=True)
                self.stdout.write("    " + traceback.replace("\n", "\n    "))

    def do_retry(self, options: dict[str, Any]) -> None:
        self.act("retry", options)

    def do_delete(self, options: dict[str, Any]) -> None:
        self.act("delete", options)

    def act(self, action: str, options: dict[str, Any]) -> None:
        if bool(options["ids"]) == bool(options["all"]):
            raise CommandError("give job ids, or --all (with --queue/--name to narrow it)")
        if options["ids"]:
            outcome = operations.perform_many(options["ids"], action)
            if options["json"]:
                self.emit_json({"done": outcome.done, "refused": dict(outcome.refused)})
            else:
                for job_id in outcome.done:
                    self.stdout.write(f"{job_id}: {JobAction(action).verb}")
                for job_id, why in outcome.refused:
                    self.stderr.write(f"{job_id}: not {JobAction(action).verb}: {why}")
            if outcome.refused:
                done = JobAction(action).verb
                raise CommandError(f"{len(outcome.refused)} job(s) were not {done}")
            return
        queues = self.queues(options)
        if not options["yes"]:
            what = f" named {options['name']!r}" if options["name"] else ""
            question = f"{action.capitalize()} every failed job{what} of {', '.join(queues)}?"
            if not sys.stdin.isatty():
                raise CommandError(f"{question} Pass --yes to confirm (stdin is not a terminal).")
            if input(f"{question} [y/N] ").strip().lower() not in ("y", "yes"):
                raise CommandError("cancelled; nothing was changed")
        results = {}
        mode: FailedBatchMode = "retry" if action == "retry" else "delete"
        for queue in queues:
            result = operations.process_failed(queue, mode, name=options["name"])
            results[queue] = result.done
            if not options["json"]:
                self.stdout.write(f"{queue}: {result.done} {JobAction(action).verb}")
        if options["json"]:
            self.emit_json({"done": results})
