"""``django.tasks`` tasks used by the backend's tests (tests/tasks/).

They run on ``RQueueBackend`` (``TASKS`` in ``tests.settings``). A worker
subprocess imports this module by the task's module path when it first runs
one of them, which also connects the receivers below: each writes a ledger
line (see :mod:`tests.jobs_app.jobs`) for Django's ``task_started`` and
``task_finished`` and for our ``job_started`` / ``job_succeeded`` /
``job_retrying`` / ``job_failed`` of these tasks, so a test reads what the
worker process saw. A task's first argument is the ledger path.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from django_rqueue import signals
from django_rqueue.backends import job_function_of
from django_rqueue.job import Job
from django_rqueue.tasks_api import TaskContext, TaskResult, task, task_finished, task_started
from tests.jobs_app.jobs import read_ledger, write_ledger


@task
def record_task(ledger: str, tag: str) -> str:
    """Write ``run`` and return ``tag``."""
    write_ledger(ledger, tag, "run")
    return tag


@task(queue_name="emails", priority=10)
def email_task(ledger: str, tag: str) -> str:
    """Like :func:`record_task`, on the ``emails`` queue at priority 10."""
    write_ledger(ledger, tag, "run")
    return tag


@task(queue_name="low")
def flaky_task(ledger: str, tag: str, failures: int) -> int:
    """Raise ``ValueError`` on the first ``failures`` runs, then return the run number
    (queue ``low``: 3 attempts, 0.05 s backoff)."""
    runs = sum(1 for e in read_ledger(ledger) if e["tag"] == tag and e["event"] == "run") + 1
    write_ledger(ledger, tag, "run", run=runs)
    if runs <= failures:
        raise ValueError(f"flaky {tag} run {runs}")
    return runs


@task(queue_name="low")
def dies_task(ledger: str, tag: str, deaths: int) -> int:
    """End its worker process (``os._exit``) on the first ``deaths`` runs, then return the
    run number (queue ``low``: 3 attempts, 0.05 s backoff)."""
    runs = sum(1 for e in read_ledger(ledger) if e["tag"] == tag and e["event"] == "run") + 1
    write_ledger(ledger, tag, "run", run=runs)
    if runs <= deaths:
        os._exit(3)
    return runs


@task(queue_name="low")
def interrupted_task(ledger: str, tag: str) -> None:
    """Write ``run``, then raise ``KeyboardInterrupt`` (queue ``low``: 3 attempts)."""
    write_ledger(ledger, tag, "run")
    raise KeyboardInterrupt(f"{tag} interrupted")


@task(queue_name="low")
async def async_interrupted_task(ledger: str, tag: str) -> None:
    """:func:`interrupted_task`, async."""
    write_ledger(ledger, tag, "run")
    raise KeyboardInterrupt(f"{tag} interrupted")


@task(queue_name="low")
def unstorable_result_task(ledger: str, tag: str) -> object:
    """Write ``run``, then return a value JSON cannot carry (queue ``low``: 3 attempts)."""
    write_ledger(ledger, tag, "run")
    return object()


@task
def gated_task(ledger: str, tag: str, gate: str) -> str:
    """Write ``start``, wait until the file ``gate`` exists (at most 60 s), write ``end``."""
    write_ledger(ledger, tag, "start")
    deadline = time.monotonic() + 60
    while not os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.005)
    write_ledger(ledger, tag, "end")
    return tag


@task(takes_context=True)
def context_task(context: TaskContext[Any, Any], ledger: str, tag: str) -> int:
    """Write ``run`` with what the context says; return ``context.attempt``."""
    result = context.task_result
    write_ledger(
        ledger,
        tag,
        "run",
        attempt=context.attempt,
        id=result.id,
        status=str(result.status),
        worker_ids=result.worker_ids,
    )
    return context.attempt


@task
async def async_task(ledger: str, tag: str) -> str:
    """An async task: write ``run`` after yielding to the event loop once."""
    await asyncio.sleep(0)
    write_ledger(ledger, tag, "run")
    return tag


@task(backend="immediate")
def immediate_task(ledger: str, tag: str) -> str:
    """A task of Django's ImmediateBackend: not ours, so no rqueue worker may run it."""
    write_ledger(ledger, tag, "run")
    return tag


def _is_ours(result: TaskResult[Any, Any]) -> bool:
    return result.task.module_path.startswith(f"{__name__}.") and bool(result.args)


def _django_event(event: str) -> Any:  # a signal receiver
    def receiver(sender: type, task_result: TaskResult[Any, Any], **kwargs: Any) -> None:
        if _is_ours(task_result):
            write_ledger(
                str(task_result.args[0]),
                str(task_result.args[1]) if len(task_result.args) > 1 else "",
                event,
                sender=f"{sender.__module__}.{sender.__qualname__}",
                id=task_result.id,
                status=str(task_result.status),
                attempts=task_result.attempts,
                worker_ids=task_result.worker_ids,
                errors=[e.exception_class_path for e in task_result.errors],
                queue=task_result.task.queue_name,
                enqueued_at=_iso(task_result.enqueued_at),
                started_at=_iso(task_result.started_at),
                finished_at=_iso(task_result.finished_at),
            )

    return receiver


def _iso(value: Any) -> str | None:
    return None if value is None else value.isoformat()


def _job_event(event: str) -> Any:  # a signal receiver
    def receiver(sender: object, job: Job[Any], **kwargs: Any) -> None:
        if job.name.startswith(f"task:{__name__}.") and job.args:
            write_ledger(
                str(job.args[0]),
                str(job.args[1]) if len(job.args) > 1 else "",
                event,
                sender=repr(sender),
                id=job.id,
                attempt=job.attempts,
            )

    return receiver


_receivers = {name: _django_event(f"django:{name}") for name in ("started", "finished")}
task_started.connect(_receivers["started"], dispatch_uid="tests.tasks.started")
task_finished.connect(_receivers["finished"], dispatch_uid="tests.tasks.finished")
_job_receivers = {
    name: _job_event(f"rqueue:{name}") for name in ("started", "succeeded", "retrying", "failed")
}
# Per sender, as a site would: connected to every job_* signal for all senders, a
# job_succeeded receiver would stop the worker from reserving other jobs in batches.
for _task in (
    record_task,
    email_task,
    flaky_task,
    dies_task,
    gated_task,
    context_task,
    async_task,
):
    for _name, _receiver in _job_receivers.items():
        getattr(signals, f"job_{_name}").connect(
            _receiver, sender=job_function_of(_task), weak=False
        )
