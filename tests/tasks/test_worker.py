"""``django.tasks`` tasks end to end: enqueued here, run by real ``rqueue_work`` processes.

The tasks (tests/jobs_app/tasks.py) and their signal receivers write a
ledger in the worker process; ``get_result`` reads Redis from this one. Every
worker is started with ``--worker-id tw``, so a child's worker id is
``tw/<its pid>`` and the ledger's ``pid`` tells which worker ran an attempt.
"""

from __future__ import annotations

import datetime
import functools
import json
import signal
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from django_rqueue import JobStatus, get_job
from django_rqueue.exceptions import UnknownJob, WorkerLost
from django_rqueue.ops.counts import queue_counts
from django_rqueue.tasks_api import TaskResult, TaskResultStatus, default_task_backend
from tests.jobs_app.jobs import read_ledger
from tests.jobs_app.tasks import (
    async_interrupted_task,
    async_task,
    context_task,
    dies_task,
    flaky_task,
    gated_task,
    interrupted_task,
    record_task,
    unstorable_result_task,
)
from tests.management.commands.conftest import Manage
from tests.support.jobs_in_state import enqueue_raw
from tests.support.processes import STARTUP, CommandProcess
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow

BACKEND = "django_rqueue.backends.RQueueBackend"


def start_worker(manage: Manage, *args: str) -> CommandProcess:
    return manage("rqueue_work", "--queues", "default,emails,low", "--worker-id", "tw", *args)


def reached(
    result_id: str, status: TaskResultStatus, timeout: float = STARTUP
) -> TaskResult[Any, Any]:
    """The task's result once it has ``status`` (fails after ``timeout`` s)."""

    def check() -> TaskResult[Any, Any] | None:
        result = default_task_backend.get_result(result_id)
        return result if result.status == status else None

    found = wait_until(check, timeout=timeout, message=f"{result_id} never {status}")
    assert found is not None
    return found


def events(ledger: str, tag: str, event: str) -> list[dict[str, Any]]:
    return [e for e in read_ledger(ledger) if e["tag"] == tag and e["event"] == event]


def workers_of(ledger: str, tag: str, event: str) -> list[str]:
    """``tw/<pid>`` of each ledger line ``event`` of ``tag``: the worker of each attempt."""
    return [f"tw/{e['pid']}" for e in events(ledger, tag, event)]


def stop(worker: CommandProcess) -> None:
    worker.signal(signal.SIGTERM)
    assert worker.wait(10) == 0, worker.report()


def test_a_task_runs_in_a_worker_and_its_result_shows_each_state(
    manage: Manage, ledger: str, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    result = gated_task.enqueue(ledger, "g", str(gate))
    assert default_task_backend.get_result(result.id).status == TaskResultStatus.READY

    worker = start_worker(manage, "--concurrency", "1")
    running = reached(result.id, TaskResultStatus.RUNNING)
    wait_until(lambda: events(ledger, "g", "start"), message="task did not start")
    assert running.worker_ids == workers_of(ledger, "g", "start") and running.attempts == 1
    assert running.enqueued_at is not None and running.started_at is not None
    assert running.enqueued_at <= running.started_at == running.last_attempted_at
    assert running.finished_at is None and running.errors == []

    gate.touch()
    done = reached(result.id, TaskResultStatus.SUCCESSFUL, timeout=10)
    assert done.return_value == "g"
    assert (done.worker_ids, done.errors) == (running.worker_ids, [])
    assert done.started_at is not None and done.finished_at is not None
    assert done.enqueued_at == running.enqueued_at
    assert done.started_at <= done.finished_at
    assert (done.task.func, done.task.queue_name) == (gated_task.func, "default")

    # An ordinary job: get_job, the counts rqueue_info shows.
    job = get_job(result.id)
    assert job is not None
    assert (job.name, job.status, job.result) == (
        "task:tests.jobs_app.tasks.gated_task",
        JobStatus.SUCCEEDED,
        "g",
    )
    assert queue_counts("default").succeeded_total == 1

    # Django's signals and ours, sent in the worker process.
    wait_until(lambda: events(ledger, "g", "django:finished"), timeout=5)
    [started] = events(ledger, "g", "django:started")
    [finished] = events(ledger, "g", "django:finished")
    assert started["sender"] == finished["sender"] == BACKEND
    assert (started["status"], started["attempts"]) == ("RUNNING", 1)
    assert started["worker_ids"] == running.worker_ids
    assert (finished["status"], finished["attempts"], finished["errors"]) == ("SUCCESSFUL", 1, [])
    assert finished["started_at"] <= finished["finished_at"]
    assert len(events(ledger, "g", "rqueue:started")) == 1
    assert len(events(ledger, "g", "rqueue:succeeded")) == 1
    [end] = events(ledger, "g", "end")
    assert end["t"] <= finished["t"]
    stop(worker)


def test_retries_give_one_task_error_per_failed_attempt_and_one_worker_id_per_attempt(
    manage: Manage, ledger: str
) -> None:
    ok = flaky_task.enqueue(ledger, "ok", 2)  # queue low: 3 attempts, 0.05 s backoff
    bad = flaky_task.enqueue(ledger, "bad", 5)
    worker = start_worker(manage, "--concurrency", "2")

    done = reached(ok.id, TaskResultStatus.SUCCESSFUL)
    assert done.return_value == 3
    assert [e.exception_class for e in done.errors] == [ValueError, ValueError]
    assert "flaky ok run 1" in done.errors[0].traceback
    assert done.worker_ids == workers_of(ledger, "ok", "run") and done.attempts == 3

    failed = reached(bad.id, TaskResultStatus.FAILED)
    assert [e.exception_class_path for e in failed.errors] == ["builtins.ValueError"] * 3
    assert failed.worker_ids == workers_of(ledger, "bad", "run") and failed.attempts == 3
    assert failed.finished_at is not None and failed.started_at is not None
    assert failed.started_at <= failed.finished_at
    assert get_job(bad.id).status is JobStatus.FAILED  # type: ignore[union-attr]
    assert queue_counts("low").failed == 1

    # Django's task_finished once, at the end; ours for every attempt.
    wait_until(lambda: events(ledger, "bad", "django:finished"), timeout=5)
    assert [e["attempts"] for e in events(ledger, "bad", "django:started")] == [1, 2, 3]
    [finished] = events(ledger, "bad", "django:finished")
    assert (finished["status"], finished["attempts"]) == ("FAILED", 3)
    assert finished["errors"] == ["builtins.ValueError"] * 3
    assert finished["worker_ids"] == failed.worker_ids
    assert len(events(ledger, "bad", "rqueue:retrying")) == 2
    assert len(events(ledger, "bad", "rqueue:failed")) == 1
    assert [e["status"] for e in events(ledger, "ok", "django:finished")] == ["SUCCESSFUL"]
    stop(worker)


def test_attempts_the_master_fails_for_a_dead_child_name_that_child(
    manage: Manage, ledger: str
) -> None:
    once = dies_task.enqueue(ledger, "once", 1)  # queue low: 3 attempts, 0.05 s backoff
    always = dies_task.enqueue(ledger, "always", 5)
    worker = start_worker(manage, "--concurrency", "1")

    done = reached(once.id, TaskResultStatus.SUCCESSFUL)
    assert done.return_value == 2
    assert [e.exception_class for e in done.errors] == [WorkerLost]
    died, ran = workers_of(ledger, "once", "run")
    assert done.worker_ids == [died, ran] and died != ran  # a new child after the death

    failed = reached(always.id, TaskResultStatus.FAILED)
    assert [e.exception_class for e in failed.errors] == [WorkerLost] * 3
    assert failed.worker_ids == workers_of(ledger, "always", "run")
    # The master failed the last attempt, so it sent task_finished.
    wait_until(lambda: events(ledger, "always", "django:finished"), timeout=5)
    [finished] = events(ledger, "always", "django:finished")
    assert finished["pid"] == worker.pid
    assert (finished["status"], finished["worker_ids"]) == ("FAILED", failed.worker_ids)
    stop(worker)


def test_a_task_whose_module_path_no_longer_resolves_fails_and_the_worker_goes_on(
    manage: Manage, ledger: str
) -> None:
    gone = enqueue_raw("task:tests.jobs_app.removed_tasks.send", "[]")
    not_a_task = enqueue_raw("task:tests.jobs_app.jobs.record", json.dumps([ledger, "plain"]))
    # Outside every installed app: never imported (importing it would end the child).
    outside = enqueue_raw("task:tests.support.exits_on_import.x", "[]")
    after = record_task.enqueue(ledger, "after")
    worker = start_worker(manage, "--concurrency", "1")

    reached(after.id, TaskResultStatus.SUCCESSFUL)
    for job_id, message in [
        (
            gone,
            "'tests.jobs_app.removed_tasks.send' cannot be imported: No module named "
            "'tests.jobs_app.removed_tasks'",
        ),
        (not_a_task, "'tests.jobs_app.jobs.record' is not a django.tasks Task"),
        (
            outside,
            "its module 'tests.support.exits_on_import' is not in an installed app nor in "
            "RQUEUE['TASK_MODULES'], so it was not imported",
        ),
    ]:
        job = get_job(job_id)
        assert job is not None and job.status is JobStatus.FAILED
        assert job.attempts == 1  # not retried: no worker can run it
        assert job.error is not None
        assert job.error["type"] == f"{UnknownJob.__module__}.UnknownJob"
        assert message in job.error["message"]
    assert events(ledger, "plain", "run") == []  # a plain @job is never run as a task
    assert worker.alive()
    stop(worker)


@pytest.mark.parametrize("made", [interrupted_task, async_interrupted_task], ids=["sync", "async"])
def test_a_task_raising_keyboard_interrupt_fails_its_attempt_and_its_worker_goes_on(
    manage: Manage, ledger: str, made: Any
) -> None:
    result = made.enqueue(ledger, "k")
    worker = start_worker(manage, "--concurrency", "1")
    done = reached(result.id, TaskResultStatus.FAILED, timeout=15)
    assert [e.exception_class_path for e in done.errors] == ["builtins.KeyboardInterrupt"] * 3
    assert done.errors[0].exception_class is KeyboardInterrupt
    assert "KeyboardInterrupt: k interrupted" in done.errors[-1].traceback
    # Failed attempts, not lost workers: one child ran all three, and still runs.
    assert len(set(workers_of(ledger, "k", "run"))) == 1
    assert len(done.worker_ids) == 3 and set(done.worker_ids) == set(workers_of(ledger, "k", "run"))
    after = record_task.enqueue(ledger, "after")
    reached(after.id, TaskResultStatus.SUCCESSFUL)
    assert workers_of(ledger, "after", "run") == workers_of(ledger, "k", "run")[:1]
    stop(worker)


def test_a_return_value_json_cannot_carry_fails_the_attempt_with_a_type_error(
    manage: Manage, ledger: str
) -> None:
    result = unstorable_result_task.enqueue(ledger, "u")
    worker = start_worker(manage, "--concurrency", "1")
    done = reached(result.id, TaskResultStatus.FAILED, timeout=15)
    assert [e.exception_class for e in done.errors] == [TypeError] * 3
    assert "cannot be stored as JSON" in done.errors[0].traceback
    with pytest.raises(ValueError, match="Task failed"):
        _ = done.return_value
    stop(worker)


def test_a_context_task_gets_attempt_1_on_its_first_run(manage: Manage, ledger: str) -> None:
    result = context_task.enqueue(ledger, "c")
    worker = start_worker(manage, "--concurrency", "1")
    done = reached(result.id, TaskResultStatus.SUCCESSFUL)
    assert done.return_value == 1
    [run] = events(ledger, "c", "run")
    assert (run["attempt"], run["id"], run["status"]) == (1, result.id, "RUNNING")
    assert run["worker_ids"] == done.worker_ids == [f"tw/{run['pid']}"]
    stop(worker)


def test_a_higher_priority_runs_first_in_a_queue(manage: Manage, ledger: str) -> None:
    record_task.using(priority=-10).enqueue(ledger, "low")
    record_task.enqueue(ledger, "mid")
    record_task.using(priority=50).enqueue(ledger, "high")
    worker = manage("rqueue_work", "--queues", "default", "--burst", "--concurrency", "1")
    assert worker.wait(STARTUP) == 0, worker.report()
    assert [e["tag"] for e in read_ledger(ledger) if e["event"] == "run"] == ["high", "mid", "low"]


def test_run_after_defers_a_task(manage: Manage, ledger: str) -> None:
    worker = start_worker(manage, "--concurrency", "1")
    run_after = timezone.now() + datetime.timedelta(seconds=1)
    result = record_task.using(run_after=run_after).enqueue(ledger, "later")
    assert default_task_backend.get_result(result.id).status == TaskResultStatus.READY
    assert get_job(result.id).status is JobStatus.SCHEDULED  # type: ignore[union-attr]

    done = reached(result.id, TaskResultStatus.SUCCESSFUL)
    assert done.task.run_after == run_after
    assert done.started_at is not None
    # Redis keeps milliseconds: the job is due at run_after's millisecond.
    assert done.started_at >= run_after.replace(microsecond=run_after.microsecond // 1000 * 1000)
    stop(worker)


def test_an_async_task_runs_on_a_workers_event_loop(manage: Manage, ledger: str) -> None:
    results = [async_task.enqueue(ledger, tag) for tag in ("a", "b")]
    worker = start_worker(manage, "--concurrency", "1", "--async-concurrency", "2")
    for result, tag in zip(results, ("a", "b"), strict=True):
        done = reached(result.id, TaskResultStatus.SUCCESSFUL)
        assert done.return_value == tag
        assert done.worker_ids == workers_of(ledger, tag, "run") and done.attempts == 1
        wait_until(functools.partial(events, ledger, tag, "django:finished"), timeout=5)
        [started] = events(ledger, tag, "django:started")
        [finished] = events(ledger, tag, "django:finished")
        assert (started["status"], finished["status"]) == ("RUNNING", "SUCCESSFUL")
        assert finished["worker_ids"] == done.worker_ids
    stop(worker)
