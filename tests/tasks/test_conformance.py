"""``RQueueBackend`` against what the tasks framework's own backend tests expect of a backend.

The behaviours Django's ``tests/tasks/`` and the django-tasks backport's tests
check of their backends, where they apply to one that stores its results in
Redis and runs its tasks in workers: the result ``enqueue()`` returns is the one
``get_result()`` reads, validation at enqueue, an empty ``QUEUES``, the system
check, the framework's logging. Same tests on every supported Django
(:mod:`django_rqueue.tasks_api` gives the API).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from typing import Any

import pytest
import redis
from django.conf import settings as django_settings
from django.db import transaction
from django.test import override_settings
from django.utils import timezone
from pytest_django.fixtures import Settings as SettingsFixture

from django_rqueue import tasks_api
from django_rqueue.backends import RQueueBackend
from django_rqueue.tasks_api import (
    InvalidTask,
    TaskResultDoesNotExist,
    TaskResultStatus,
    default_task_backend,
    task,
    task_backends,
)
from tests.jobs_app.tasks import async_task, context_task, email_task, record_task

BACKEND = "django_rqueue.backends.RQueueBackend"


def plain(ledger: str, tag: str) -> str:
    """A module-level function for tests that make their own tasks of it."""
    return tag


def enqueued_at(result: Any) -> datetime.datetime | None:
    """``result.enqueued_at`` (a call, so that mypy does not keep it narrowed across a commit)."""
    return result.enqueued_at  # type: ignore[no-any-return]


def local_function_task() -> Any:
    def inner() -> None:
        pass

    return inner


# -- (a) the result enqueue() returns is the one get_result() reads ------------------


def test_the_result_enqueue_returns_equals_get_result_read_right_after(ledger: str) -> None:
    later = timezone.now() + datetime.timedelta(hours=1)
    for made in (
        record_task,
        email_task.using(priority=-5),
        record_task.using(run_after=later),
        context_task,
    ):
        result = made.enqueue(ledger, "x")
        assert result.enqueued_at is not None
        assert default_task_backend.get_result(result.id) == result
        assert made.get_result(result.id) == result


def test_the_result_aenqueue_returns_equals_aget_result(ledger: str) -> None:
    async def both() -> tuple[Any, Any, Any]:
        result = await async_task.aenqueue(ledger, "a")
        return (
            result,
            await default_task_backend.aget_result(result.id),
            await async_task.aget_result(result.id),
        )

    result, read, read_by_task = asyncio.run(both())
    assert read == result and read_by_task == result


@pytest.mark.django_db(transaction=True)
def test_a_result_enqueued_in_a_transaction_equals_get_result_after_the_commit(
    ledger: str,
) -> None:
    with transaction.atomic():
        result = record_task.enqueue(ledger, "x")
        assert enqueued_at(result) is None
    assert enqueued_at(result) is not None
    assert default_task_backend.get_result(result.id) == result


def test_refresh_keeps_an_unchanged_result_equal(ledger: str) -> None:
    result = record_task.enqueue(ledger, "x")
    before = default_task_backend.get_result(result.id)
    result.refresh()
    assert result == before


# -- (b) the check: django_rqueue must be an installed app ----------------------------


def test_check_reports_django_rqueue_missing_from_installed_apps() -> None:
    assert task_backends["default"].check() == []
    apps = [app for app in django_settings.INSTALLED_APPS if not app.startswith("django_rqueue")]
    with override_settings(INSTALLED_APPS=apps):
        found = list(task_backends["default"].check())
    assert [m.id for m in found] == ["rqueue.E009"]
    assert "'django_rqueue'" in found[0].msg and "INSTALLED_APPS" in found[0].msg
    assert found[0].obj == "TASKS['default']"


# -- (c) QUEUES = []: every queue RQUEUE declares, as for Django's own backends ---------


@pytest.mark.parametrize("params", [{}, {"QUEUES": []}], ids=["absent", "empty"])
def test_an_empty_or_absent_queues_list_allows_every_declared_rqueue_queue(
    params: dict[str, Any], ledger: str
) -> None:
    with override_settings(TASKS={"default": {"BACKEND": BACKEND, **params}}):
        backend = task_backends["default"]
        assert isinstance(backend, RQueueBackend)
        assert backend.check() == []
        for queue in ("default", "emails", "low"):
            made = task(queue_name=queue)(plain)
            result = made.enqueue(ledger, queue)
            assert backend.get_result(result.id).task.queue_name == queue
        with pytest.raises(InvalidTask, match=r"'nope' is not declared in RQUEUE\['QUEUES'\]"):
            task(queue_name="nope")(plain)


# -- (d) validation at enqueue, not only at @task / .using() --------------------------


def test_a_task_whose_queue_tasks_no_longer_allows_is_rejected_at_enqueue(
    ledger: str, rqueue_redis: redis.Redis
) -> None:
    made = email_task.using(priority=1)  # valid now
    tasks = {"default": {"BACKEND": BACKEND, "QUEUES": ["default"]}}
    with override_settings(TASKS=tasks):
        with pytest.raises(InvalidTask, match="Queue 'emails' is not valid for backend"):
            made.enqueue(ledger, "x")
        with pytest.raises(InvalidTask, match="Queue 'emails' is not valid for backend"):
            asyncio.run(made.aenqueue(ledger, "x"))
    assert rqueue_redis.dbsize() == 0
    assert made.enqueue(ledger, "x").status == TaskResultStatus.READY  # valid again


def test_a_task_whose_queue_rqueue_no_longer_declares_is_rejected_at_enqueue(
    ledger: str, settings: SettingsFixture, rqueue_redis: redis.Redis
) -> None:
    made = email_task.using(priority=1)
    made.enqueue(ledger, "x")  # valid now (and remembered as such for these settings)
    written = rqueue_redis.dbsize()
    settings.RQUEUE = {**settings.RQUEUE, "QUEUES": {"default": {}, "low": {}}}
    with pytest.raises(InvalidTask, match=r"'emails' is not declared in RQUEUE\['QUEUES'\]"):
        made.enqueue(ledger, "x")
    assert rqueue_redis.dbsize() == written


# -- what Django's and the backport's task tests check of every backend ---------------


def test_django_validation_applies_at_task_using_and_enqueue(settings: SettingsFixture) -> None:
    with pytest.raises(InvalidTask, match="priority must be a whole number"):
        record_task.using(priority=101)
    with pytest.raises(InvalidTask, match="module level"):
        task()(local_function_task())
    with pytest.raises(InvalidTask, match="first argument of 'context'"):
        task(takes_context=True)(plain)  # type: ignore[arg-type]
    with pytest.raises(InvalidTask, match="aware datetime"):
        record_task.using(run_after=datetime.datetime(2030, 1, 1))


def test_arguments_django_cannot_normalize_raise_type_error(ledger: str) -> None:
    with pytest.raises(TypeError, match="Unsupported type"):
        record_task.enqueue(ledger, datetime.datetime.now(tz=datetime.UTC))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Unsupported type"):
        asyncio.run(record_task.aenqueue(ledger, object()))  # type: ignore[arg-type]


def test_a_new_result_is_ready_with_no_errors_and_no_return_value(ledger: str) -> None:
    result = context_task.enqueue(ledger, "x")
    assert result.status == TaskResultStatus.READY and not result.is_finished
    assert (result.errors, result.worker_ids, result.attempts) == ([], [], 0)
    assert (result.started_at, result.finished_at, result.last_attempted_at) == (None,) * 3
    with pytest.raises(ValueError, match="Task has not finished yet"):
        _ = result.return_value


def test_get_result_of_another_task_raises_task_result_mismatch(ledger: str) -> None:
    result = email_task.enqueue(ledger, "x")
    with pytest.raises(Exception, match="Task does not match") as raised:
        record_task.get_result(result.id)
    assert type(raised.value).__name__ == "TaskResultMismatch"


def test_a_missing_result_raises_task_result_does_not_exist_sync_and_async() -> None:
    with pytest.raises(TaskResultDoesNotExist):
        record_task.get_result("default:123")
    with pytest.raises(TaskResultDoesNotExist):
        asyncio.run(default_task_backend.aget_result("default:123"))


def test_enqueue_is_logged_by_the_tasks_framework(
    ledger: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger=tasks_api.MODULE):
        result = record_task.enqueue(ledger, "x")
    lines = [r.getMessage() for r in caplog.records if r.name == tasks_api.MODULE]
    assert len(lines) == 1 and "enqueued" in lines[0] and result.id in lines[0]


def test_the_backend_options_are_kept_and_the_default_is_ours() -> None:
    tasks = {"default": {"BACKEND": BACKEND, "OPTIONS": {"x": 1}}}
    with override_settings(TASKS=tasks):
        backend = task_backends["default"]
        assert isinstance(backend, RQueueBackend)
        assert (backend.alias, backend.options) == ("default", {"x": 1})
        assert default_task_backend.alias == "default"
