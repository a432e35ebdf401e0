"""The options of dependencies (``using(depends_on=..., on_dependency_failure=...,
pass_results=..., dependency_timeout=...)``) and the two ``WORKFLOW_*`` settings."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from pytest_django.fixtures import Settings

from django_rqueue import Job, JobStatus
from django_rqueue.conf import get_config, problems
from django_rqueue.exceptions import JobStateError
from django_rqueue.options import NO_TIMEOUT, JobOptions
from tests.workflows.jobs import fetch, parse

A, B = "default:aaaaaaaaaaaaaaaaaaaaaa", "emails:bbbbbbbbbbbbbbbbbbbbbb"


def test_using_keeps_the_ids_of_jobs_and_of_ids_in_order() -> None:
    parent: Job[None] = Job(id=B, name="x", queue="emails", status=JobStatus.QUEUED)
    bound = parse.using(depends_on=[A, parent], on_dependency_failure="run", pass_results=True)
    assert bound.options.depends_on == (A, B)
    assert bound.options.on_dependency_failure == "run"
    assert bound.options.pass_results is True
    assert parse.options.depends_on is None  # using() made a copy


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        (90, 90),
        (0.5, 0.5),
        (datetime.timedelta(hours=2), 7200.0),
        (NO_TIMEOUT, NO_TIMEOUT),
        (None, None),
    ],
)
def test_dependency_timeout_is_kept_in_seconds_or_as_the_sentinel(given: Any, kept: Any) -> None:
    assert parse.using(dependency_timeout=given).options.dependency_timeout == kept


def test_an_empty_depends_on_is_no_dependency() -> None:
    assert parse.using(depends_on=[]).options.depends_on is None


@pytest.mark.parametrize(
    ("options", "error", "words"),
    [
        ({"depends_on": A}, TypeError, "list of jobs"),
        (
            {"depends_on": Job(id=A, name="x", queue="default", status=JobStatus.QUEUED)},
            TypeError,
            "list of jobs",
        ),
        ({"depends_on": ["no-queue"]}, ValueError, "depends_on"),
        ({"depends_on": [42]}, ValueError, "depends_on"),
        ({"depends_on": ["default:has space"]}, ValueError, "depends_on"),
        ({"on_dependency_failure": "ignore"}, ValueError, "on_dependency_failure"),
        ({"pass_results": "yes"}, ValueError, "pass_results"),
        ({"dependency_timeout": 0}, ValueError, "dependency_timeout"),
        ({"dependency_timeout": -1}, ValueError, "dependency_timeout"),
        ({"dependency_timeout": float("inf")}, ValueError, "dependency_timeout"),
        ({"dependency_timeout": True}, ValueError, "dependency_timeout"),
        ({"dependency_timeout": datetime.timedelta(0)}, ValueError, "dependency_timeout"),
    ],
)
def test_bad_options_of_dependencies_are_refused_at_using(
    options: dict[str, Any], error: type[Exception], words: str
) -> None:
    with pytest.raises(error, match=words):
        parse.using(**options)


def test_job_options_check_depends_on_itself() -> None:
    with pytest.raises(TypeError, match="tuple of job ids"):
        JobOptions(depends_on=[A])  # type: ignore[arg-type]


def test_merged_keeps_earlier_dependency_options() -> None:
    bound = parse.using(depends_on=[A]).using(on_dependency_failure="run")
    assert bound.options.depends_on == (A,)
    assert bound.options.on_dependency_failure == "run"


def test_delay_many_refuses_dependencies() -> None:
    for bound in (fetch.using(depends_on=[A]), fetch.using(on_dependency_failure="run")):
        with pytest.raises(ValueError, match="delay_many"):
            bound.delay_many([(("u",), {})])


def test_the_dependency_options_without_depends_on_are_refused_by_delay() -> None:
    with pytest.raises(ValueError, match="depends_on"):
        fetch.using(pass_results=True).delay("u")


def test_delay_with_depends_on_a_job_that_does_not_exist_raises() -> None:
    with pytest.raises(JobStateError, match="does not exist"):
        fetch.using(depends_on=[A]).delay("u")


def test_a_plain_delay_is_unchanged() -> None:
    assert fetch.delay("u").status == JobStatus.QUEUED


# -- settings ------------------------------------------------------------------------


def test_the_workflow_settings_default_to_seven_days_and_inline_edges() -> None:
    config = get_config()
    assert config.workflow_dependency_timeout == 7 * 86400
    assert config.workflow_force_outbox is False


def test_the_workflow_settings_are_read(settings: Settings) -> None:
    settings.RQUEUE = {
        **settings.RQUEUE,
        "WORKFLOW_DEPENDENCY_TIMEOUT": None,
        "WORKFLOW_FORCE_OUTBOX": True,
    }
    config = get_config()
    assert config.workflow_dependency_timeout is None
    assert config.workflow_force_outbox is True
    settings.RQUEUE = {**settings.RQUEUE, "WORKFLOW_DEPENDENCY_TIMEOUT": 60}
    assert get_config().workflow_dependency_timeout == 60.0


@pytest.mark.parametrize(
    ("key", "value", "check"),
    [
        ("WORKFLOW_DEPENDENCY_TIMEOUT", 0, "rqueue.E005"),
        ("WORKFLOW_DEPENDENCY_TIMEOUT", "7d", "rqueue.E005"),
        ("WORKFLOW_FORCE_OUTBOX", 1, "rqueue.E003"),
    ],
)
def test_bad_workflow_settings_are_reported(key: str, value: object, check: str) -> None:
    found = problems({"REDIS_URL": "redis://127.0.0.1:6379/0", key: value})
    assert [m.id for m in found] == [check]
    assert key in found[0].msg
