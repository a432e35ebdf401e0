"""``RQueueBackend`` from the enqueueing side: settings, validation, checks, enqueue, results.

No worker here (tests/tasks/test_worker.py runs tasks in real ``rqueue_work``
processes); states a worker would reach are made with the ``jobs`` fixture's
real transitions.
"""

from __future__ import annotations

import asyncio
import datetime
import importlib
import sys
from typing import Any

import pytest
import redis
from django.contrib.admin.utils import quote as admin_quote
from django.core import checks
from django.test import Client, override_settings
from django.utils import timezone
from pytest_django.fixtures import Settings as SettingsFixture

from django_rqueue import JobStatus, get_job, job, signals
from django_rqueue.backends import RQueueBackend, job_function_of, task_job_function
from django_rqueue.engine.keys import QueueKeys
from django_rqueue.exceptions import UnknownJob
from django_rqueue.tasks import bridge
from django_rqueue.tasks.bridge import ready_result
from django_rqueue.tasks_api import (
    MODULE,
    InvalidTask,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    default_task_backend,
    task,
    task_backends,
    task_enqueued,
    task_finished,
    task_started,
)
from django_rqueue.testing import capture_jobs
from tests.jobs_app.jobs import record
from tests.jobs_app.tasks import async_task, email_task, flaky_task, record_task
from tests.support import transitions
from tests.support.jobs_in_state import Jobs, retention

TASKS_DEFAULT = {"default": {"BACKEND": "django_rqueue.backends.RQueueBackend"}}


def status(result: Any) -> TaskResultStatus:
    """``result.status`` (a call, so that mypy does not keep it narrowed across refresh())."""
    return TaskResultStatus(result.status)


def plain(ledger: str, tag: str) -> str:
    """A module-level function for tests that make their own tasks of it."""
    return tag


def test_the_backend_supports_every_django_tasks_feature() -> None:
    backend = task_backends["default"]
    assert isinstance(backend, RQueueBackend)
    assert backend.supports_defer
    assert backend.supports_async_task
    assert backend.supports_get_result
    assert backend.supports_priority


def test_creating_the_backend_and_a_task_touches_no_redis(settings: SettingsFixture) -> None:
    # Nothing listens on port 1: any connection attempt would raise RedisUnavailable.
    settings.RQUEUE = {**settings.RQUEUE, "REDIS_URL": "redis://127.0.0.1:1/0"}
    backend = RQueueBackend("other", {"QUEUES": ["emails"]})
    backend.validate_task(task(queue_name="emails")(plain))
    assert backend.check() == []


# -- queues: InvalidTask at @task and .using(), the system check ----------------


def test_a_task_on_a_queue_rqueue_does_not_declare_is_invalid_at_task_and_using() -> None:
    with pytest.raises(InvalidTask, match=r"Queue 'nope' is not declared in RQUEUE\['QUEUES'\]"):
        task(queue_name="nope")(plain)
    with pytest.raises(InvalidTask, match="'nope' is not declared"):
        record_task.using(queue_name="nope")


def test_without_queues_in_tasks_every_declared_rqueue_queue_is_allowed() -> None:
    assert task_backends["default"].queues == set()
    for queue in ("default", "emails", "low"):
        assert task(queue_name=queue)(plain).queue_name == queue


def test_queues_in_tasks_restrict_the_declared_queues_further() -> None:
    assert task(queue_name="emails", backend="emails_only")(plain).backend == "emails_only"
    with pytest.raises(InvalidTask, match="Queue 'default' is not valid for backend"):
        task(backend="emails_only")(plain)
    allowed = task(queue_name="emails", backend="emails_only")(plain)
    with pytest.raises(InvalidTask, match="Queue 'low' is not valid for backend"):
        allowed.using(queue_name="low")


def test_check_names_each_tasks_queue_that_rqueue_does_not_declare() -> None:
    assert [m for m in checks.run_checks() if m.id == "rqueue.E008"] == []
    tasks = {
        "default": {
            "BACKEND": "django_rqueue.backends.RQueueBackend",
            "QUEUES": ["default", "missing", "absent"],
        }
    }
    with override_settings(TASKS=tasks):
        found = [m for m in checks.run_checks() if m.id == "rqueue.E008"]
    assert [m.level for m in found] == [checks.ERROR, checks.ERROR]
    assert "'absent'" in found[0].msg and "'missing'" in found[1].msg
    assert all("RQUEUE['QUEUES']" in m.msg for m in found)


def test_a_job_name_with_the_task_prefix_is_refused() -> None:
    with pytest.raises(ValueError, match="'task:' are for django.tasks"):
        job(name="task:tests.jobs_app.tasks.record_task")(plain)


# -- enqueue ----------------------------------------------------------------------


def test_enqueue_writes_an_ordinary_job_on_the_tasks_queue(ledger: str) -> None:
    result = email_task.enqueue(ledger, "a")
    assert result.status == TaskResultStatus.READY
    assert result.id.startswith("emails:")
    assert result.enqueued_at is not None
    assert (result.args, result.kwargs, result.backend) == ([ledger, "a"], {}, "default")
    assert (result.errors, result.worker_ids, result.attempts) == ([], [], 0)
    stored = get_job(result.id)
    assert stored is not None
    assert stored.name == "task:tests.jobs_app.tasks.email_task"
    assert (stored.status, stored.queue, stored.priority) == (JobStatus.QUEUED, "emails", 10)
    assert stored.args == [ledger, "a"]
    # The queue's own options: RQUEUE DEFAULTS here.
    assert (stored.max_attempts, stored.timeout, stored.result_ttl) == (3, 300.0, 86400)


def test_arguments_that_are_not_json_raise_at_enqueue_with_nothing_written(
    ledger: str, rqueue_redis: redis.Redis
) -> None:
    with pytest.raises(TypeError, match="Unsupported type"):
        record_task.enqueue(ledger, object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Unsupported type"):
        record_task.enqueue(ledger, tag=datetime.date(2026, 1, 1))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="'tag'.*cannot be sent as JSON"):
        record_task.enqueue(ledger, float("nan"))  # type: ignore[arg-type]
    assert rqueue_redis.dbsize() == 0


def test_tuples_and_bytes_are_normalized_as_django_tasks_does(ledger: str) -> None:
    result = record_task.enqueue(ledger, (1, b"x"))  # type: ignore[arg-type]
    assert result.args == [ledger, [1, "x"]]
    assert get_job(result.id).args == [ledger, [1, "x"]]  # type: ignore[union-attr]
    # At the top level too, positional and keyword (the path without a walk skips them).
    result = record_task.enqueue(ledger, b"y")  # type: ignore[arg-type]
    assert result.args == [ledger, "y"] and get_job(result.id).args == [ledger, "y"]  # type: ignore[union-attr]
    result = record_task.enqueue(ledger, tag=b"z")  # type: ignore[arg-type]
    assert result.kwargs == {"tag": "z"} and get_job(result.id).kwargs == {"tag": "z"}  # type: ignore[union-attr]


def test_task_enqueued_and_job_enqueued_are_sent_when_the_job_is_written(ledger: str) -> None:
    seen: list[tuple[str, object, Any]] = []

    def on_task(sender: object, task_result: Any, **kwargs: Any) -> None:
        seen.append(("task_enqueued", sender, task_result))

    def on_job(sender: object, job: Any, **kwargs: Any) -> None:
        seen.append(("job_enqueued", sender, job))

    task_enqueued.connect(on_task)
    signals.job_enqueued.connect(on_job, sender=job_function_of(record_task))
    try:
        result = record_task.enqueue(ledger, "x")
        email_task.enqueue(ledger, "other task")  # not record_task's job function
    finally:
        task_enqueued.disconnect(on_task)
        signals.job_enqueued.disconnect(on_job, sender=job_function_of(record_task))
    assert [(name, sender) for name, sender, _ in seen[:2]] == [
        ("job_enqueued", job_function_of(record_task)),
        ("task_enqueued", RQueueBackend),
    ]
    assert seen[0][2].id == result.id
    assert seen[1][2] is result and result.enqueued_at is not None
    assert [name for name, _, _ in seen[2:]] == ["task_enqueued"]


@pytest.mark.parametrize(
    ("args", "kwargs", "plain"),
    [
        (["a", 1, 2.5, True, None], {"tag": "x", "n": None}, True),
        ([], {}, True),
        ([[1, "x"], {"k": [2]}], {"tag": {"n": [1]}}, False),
    ],
)
def test_the_ready_result_equals_the_one_the_constructor_builds(
    args: list[Any], kwargs: dict[str, Any], plain: bool
) -> None:
    built = TaskResult(
        task=record_task,
        id="",
        status=TaskResultStatus.READY,
        enqueued_at=None,
        started_at=None,
        finished_at=None,
        last_attempted_at=None,
        args=args,
        kwargs=kwargs,
        backend="default",
        errors=[],
        worker_ids=[],
    )
    made = ready_result(record_task, args, kwargs, "default", plain=plain)
    assert type(made) is TaskResult and made == built and repr(made) == repr(built)
    # Its own lists and dicts, as the constructor's (normalize_json copies them).
    again = ready_result(record_task, args, kwargs, "default", plain=plain)
    assert made.args is not args and made.kwargs is not kwargs
    assert made.args is not again.args and made.errors is not again.errors
    assert made.worker_ids is not again.worker_ids
    # The direct path is the one taken on this Django (its TaskResult fields are known).
    assert bridge._SETTERS is not None


def test_task_enqueued_is_sent_to_a_receiver_in_place_of_the_framework_log(ledger: str) -> None:
    # With the framework's log receiver alone and DEBUG off the send is skipped: a single
    # receiver of another kind must still be called.
    framework_log = importlib.import_module(f"{MODULE}.signals").log_task_enqueued
    sent: list[Any] = []

    def on_task(sender: object, task_result: Any, **kwargs: Any) -> None:
        sent.append(task_result)

    # The framework's receiver is recognized (its key is the one Signal.connect made).
    assert bridge._framework_log is not None
    assert bridge._framework_log[0] in [entry[0] for entry in task_enqueued.receivers]
    assert task_enqueued.disconnect(framework_log)
    task_enqueued.connect(on_task)
    try:
        assert len(task_enqueued.receivers) == 1
        result = record_task.enqueue(ledger, "x")
    finally:
        task_enqueued.disconnect(on_task)
        task_enqueued.connect(framework_log)
    assert sent == [result]


@pytest.mark.django_db
def test_inside_a_transaction_the_job_is_written_on_commit(
    ledger: str, django_capture_on_commit_callbacks: Any
) -> None:
    sent: list[Any] = []

    def on_task(sender: object, task_result: Any, **kwargs: Any) -> None:
        sent.append(task_result)

    task_enqueued.connect(on_task)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            result = record_task.enqueue(ledger, "x")
            assert get_job(result.id) is None
            assert result.enqueued_at is None and sent == []
    finally:
        task_enqueued.disconnect(on_task)
    assert get_job(result.id) is not None
    assert sent == [result] and result.enqueued_at is not None


def test_capture_jobs_captures_tasks_without_writing(
    ledger: str, rqueue_redis: redis.Redis
) -> None:
    with capture_jobs() as captured:
        record_task.enqueue(ledger, "x")
    assert [(c.name, c.args) for c in captured] == [
        ("task:tests.jobs_app.tasks.record_task", [ledger, "x"])
    ]
    assert rqueue_redis.dbsize() == 0


def test_with_eager_the_task_runs_inline(ledger: str, settings: SettingsFixture) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "EAGER": True}
    sent: list[tuple[str, str]] = []

    def receiver(sender: object, signal: Any, task_result: Any, **kwargs: Any) -> None:
        sent.append((names[signal], str(task_result.status)))

    names = {task_enqueued: "enqueued", task_started: "started", task_finished: "finished"}
    for signal in names:
        signal.connect(receiver)
    try:
        result = record_task.enqueue(ledger, "now")
    finally:
        for signal in names:
            signal.disconnect(receiver)
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == "now"
    assert sent == [("enqueued", "READY"), ("started", "RUNNING"), ("finished", "SUCCESSFUL")]


def test_with_eager_an_async_task_runs_inline_too(ledger: str, settings: SettingsFixture) -> None:
    settings.RQUEUE = {**settings.RQUEUE, "EAGER": True}
    result = async_task.enqueue(ledger, "now")
    assert result.status == TaskResultStatus.SUCCESSFUL
    # django-stubs types an async task's return value as its coroutine.
    assert result.return_value == "now"  # type: ignore[comparison-overlap]


def test_an_async_task_is_enqueued_and_read_like_any_other(ledger: str) -> None:
    result = async_task.enqueue(ledger, "a")
    got = async_task.get_result(result.id)
    assert got.status == TaskResultStatus.READY
    assert get_job(result.id).name == "task:tests.jobs_app.tasks.async_task"  # type: ignore[union-attr]


def test_aenqueue_and_aget_result(ledger: str) -> None:
    async def both() -> tuple[Any, Any]:
        result = await async_task.aenqueue(ledger, "a")
        return result, await default_task_backend.aget_result(result.id)

    result, got = asyncio.run(both())
    assert got.id == result.id and got.status == TaskResultStatus.READY
    assert got.task.func is async_task.func


# -- get_result -------------------------------------------------------------------


def test_get_result_keeps_the_queue_priority_and_run_after_it_was_enqueued_with(
    ledger: str,
) -> None:
    run_after = timezone.now() + datetime.timedelta(hours=1, microseconds=7)
    result = email_task.using(priority=-5, run_after=run_after).enqueue(ledger, "later")
    got = default_task_backend.get_result(result.id)
    assert got.status == TaskResultStatus.READY
    assert (got.task.queue_name, got.task.priority, got.task.run_after) == ("emails", -5, run_after)
    assert got.task.func is email_task.func
    job = get_job(result.id)
    assert job is not None and job.status is JobStatus.SCHEDULED
    assert job.run_at == run_after.replace(microsecond=run_after.microsecond // 1000 * 1000)
    plain_result = email_task.get_result(email_task.enqueue(ledger, "now").id)
    assert (plain_result.task.priority, plain_result.task.run_after) == (10, None)


def test_get_result_maps_every_job_state(ledger: str, rqueue_redis: redis.Redis) -> None:
    keys = QueueKeys.of("rqueue", "low")
    result = flaky_task.enqueue(ledger, "f", 5)  # low: 3 attempts
    got = flaky_task.get_result(result.id)
    assert (got.status, got.started_at, got.finished_at, got.last_attempted_at) == (
        TaskResultStatus.READY,
        None,
        None,
        None,
    )

    transitions.reserve(rqueue_redis, keys, lease_ms=60_000, worker_id="w1")
    got.refresh()
    assert status(got) == TaskResultStatus.RUNNING
    assert (got.worker_ids, got.attempts, got.errors) == (["w1"], 1, [])
    assert got.enqueued_at is not None and got.started_at is not None
    assert got.started_at >= got.enqueued_at and got.last_attempted_at == got.started_at
    with pytest.raises(ValueError, match="not finished"):
        _ = got.return_value

    error = '{"type":"builtins.ValueError","message":"m","traceback":"tb","worker":"w1"}'
    # Retry in an hour.
    transitions.fail(rqueue_redis, keys, result.id, 1, error, 3_600_000, retention=retention())
    got.refresh()
    assert status(got) == TaskResultStatus.READY  # waiting for its retry
    assert (got.worker_ids, got.attempts) == (["w1"], 1)
    assert [e.exception_class for e in got.errors] == [ValueError]
    assert got.finished_at is None

    transitions.run_now(rqueue_redis, keys, result.id)
    transitions.reserve(rqueue_redis, keys, lease_ms=60_000, worker_id="w2")
    transitions.ack(rqueue_redis, keys, result.id, 2, "3", 600)
    done = flaky_task.get_result(result.id)
    assert done.status == TaskResultStatus.SUCCESSFUL
    assert done.return_value == 3
    assert (done.worker_ids, done.attempts, len(done.errors)) == (["w1", "w2"], 2, 1)
    assert done.finished_at is not None and done.started_at is not None
    assert done.finished_at >= done.started_at


def test_a_failed_task_has_one_error_and_one_worker_id_per_attempt(
    ledger: str, rqueue_redis: redis.Redis
) -> None:
    keys = QueueKeys.of("rqueue", "low")
    result = flaky_task.enqueue(ledger, "f", 5)
    for attempt, worker in enumerate(["w1", "w2", "w3"], 1):
        transitions.reserve(rqueue_redis, keys, lease_ms=60_000, worker_id=worker)
        error = f'{{"type":"builtins.KeyError","message":"","traceback":"tb","worker":"{worker}"}}'
        delay = 0 if attempt < 3 else -1
        transitions.fail(
            rqueue_redis, keys, result.id, attempt, error, delay, retention=retention()
        )
        if attempt < 3:
            transitions.run_now(rqueue_redis, keys, result.id)
    got = flaky_task.get_result(result.id)
    assert got.status == TaskResultStatus.FAILED
    assert got.worker_ids == ["w1", "w2", "w3"] and got.attempts == 3
    assert [e.exception_class_path for e in got.errors] == ["builtins.KeyError"] * 3
    with pytest.raises(ValueError, match="Task failed"):
        _ = got.return_value


def test_a_cancelled_task_is_failed_with_no_attempt(ledger: str) -> None:
    result = record_task.enqueue(ledger, "x")
    get_job(result.id).cancel()  # type: ignore[union-attr]
    got = record_task.get_result(result.id)
    assert (got.status, got.errors, got.worker_ids) == (TaskResultStatus.FAILED, [], [])
    assert got.finished_at is not None


@pytest.mark.parametrize("result_id", ["default:" + "A" * 22, "nope", "undeclared:" + "A" * 22])
def test_an_unknown_id_raises_task_result_does_not_exist(result_id: str) -> None:
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result(result_id)


def test_a_plain_job_is_not_a_task_result(ledger: str) -> None:
    plain_job = record.delay(ledger, "x")
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result(plain_job.id)


def test_a_task_whose_module_is_gone_is_not_a_task_result(jobs: Jobs) -> None:
    job_id = jobs.queued(name="task:tests.jobs_app.removed_tasks.send", payload="[]")
    with pytest.raises(TaskResultDoesNotExist, match="tests.jobs_app.removed_tasks"):
        default_task_backend.get_result(job_id)


@pytest.mark.django_db
def test_a_task_job_has_its_admin_page(
    ledger: str, admin_client: Client, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):  # the test runs in a transaction
        result = record_task.enqueue(ledger, "x")
    response = admin_client.get(f"/admin/django_rqueue/dashboard/jobs/{admin_quote(result.id)}/")
    assert response.status_code == 200
    assert "task:tests.jobs_app.tasks.record_task" in response.content.decode()


def test_a_worker_resolves_only_tasks_of_an_rqueue_backend() -> None:
    assert task_job_function("tests.jobs_app.tasks.record_task") is job_function_of(record_task)
    with pytest.raises(UnknownJob, match="ImmediateBackend, not django_rqueue.backends"):
        task_job_function("tests.jobs_app.tasks.immediate_task")
    with pytest.raises(UnknownJob, match="is not a django.tasks Task but a JobFunction"):
        task_job_function("tests.jobs_app.jobs.record")
    with pytest.raises(UnknownJob, match="No module named 'tests.jobs_app.removed_tasks'"):
        task_job_function("tests.jobs_app.removed_tasks.send")


def test_a_worker_imports_tasks_only_from_installed_apps_and_task_modules(
    settings: SettingsFixture,
) -> None:
    for path in ("os.system", "tests.support.exits_on_import.x", "tests.jobs_appx.tasks.t"):
        with pytest.raises(UnknownJob, match="is not in an installed app nor in RQUEUE"):
            task_job_function(path)
    assert "tests.support.exits_on_import" not in sys.modules
    settings.RQUEUE = {**settings.RQUEUE, "TASK_MODULES": ["tests.support.exits_on_import"]}
    # Listed: imported, and a module that exits at import is a clear error, not an exit.
    with pytest.raises(UnknownJob, match="cannot be imported: SystemExit: 7"):
        task_job_function("tests.support.exits_on_import.x")
