"""The plan (django_rqueue.enqueue.plan): a job function's options resolved once into the job
record and the shared script arguments, and a call validated and encoded. Pure: no Redis."""

from __future__ import annotations

import datetime

import pytest

from django_rqueue.conf import get_config
from django_rqueue.engine import calls
from django_rqueue.engine.fields import JobFields
from django_rqueue.engine.keys import QueueKeys
from django_rqueue.enqueue.plan import Plan
from django_rqueue.job import JobStatus
from tests.enqueue.jobs import add, carry


def test_options_at_their_defaults_leave_only_the_name_in_the_record():
    plan = Plan.of(add, get_config())
    assert (plan.queue, plan.status, plan.keys) == (
        "default",
        JobStatus.QUEUED,
        QueueKeys.of("rqueue", "default"),
    )
    assert dict(plan.record) == {JobFields.NAME: add.name}
    assert (plan.run_at_ms, plan.delay_ms, plan.expires_in_ms, plan.job_id) == (-1, 0, -1, None)


def test_options_off_their_defaults_are_written_and_shared_by_both_scripts():
    bound = add.using(queue="emails", priority=5, group="g", max_attempts=7, timeout=2, delay=3)
    plan = Plan.of(bound, get_config())
    assert plan.status is JobStatus.SCHEDULED and plan.delay_ms == 3000
    assert dict(plan.record) == {
        JobFields.NAME: add.name,
        JobFields.MAX_ATTEMPTS: 7,
        JobFields.TIMEOUT_MS: 2000,
    }
    keys, record = QueueKeys.of("rqueue", "emails"), calls.pairs(plan.record)
    assert plan.shared == calls.EnqueueShared(keys, (5, "g", 3000, -1), 0, tuple(record))
    assert plan.batch_shared == calls.BatchShared(keys, (5, "g", 3000, -1, 0, 3, *record))


def test_an_expiry_in_seconds_is_counted_by_the_script_and_a_datetime_is_written():
    relative = Plan.of(add.using(expires=1.5), get_config())
    assert relative.record[JobFields.EXPIRES_IN] == 1500 and relative.expires_at is None
    when = datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC)
    absolute = Plan.of(add.using(expires=when, run_at=when), get_config())
    assert absolute.record[JobFields.EXPIRES] == int(when.timestamp() * 1000)
    assert absolute.run_at_ms == int(when.timestamp() * 1000)
    assert absolute.status is JobStatus.SCHEDULED


def test_a_plan_is_resolved_once_per_setting_and_options():
    config = get_config()
    assert Plan.of(add, config) is Plan.of(add, config)
    naive = add.using(run_at=datetime.datetime(2030, 1, 1))  # read in the active time zone
    assert Plan.of(naive, config) is not Plan.of(naive, config)


def test_a_submission_is_the_enqueue_call_of_the_shared_part_and_its_own_payload():
    plan = Plan.of(carry.using(job_id="order-1"), get_config())
    submission = plan.submission(("x",), {})
    assert submission.job_id == "default:order-1" and submission.unique_key == ""
    call = submission.call()
    assert call == plan.shared.call("default:order-1", "", JobFields.PAYLOAD, submission.payload)
    assert submission.fields() == {**plan.record, JobFields.PAYLOAD: submission.payload}
    assert submission.job.status is JobStatus.QUEUED and submission.job.args == ["x"]


def test_a_call_that_does_not_fit_the_signature_is_refused_before_anything_is_built():
    plan = Plan.of(add, get_config())
    with pytest.raises(TypeError):
        plan.submission((), {"z": 1})
