"""The poller finishes or undoes what a stalled caller left in a queue's ``wfopen``: a staged
creation (rolled back before its commit) and a ``retry_failed()`` (completed)."""

from __future__ import annotations

import logging

import pytest
import redis
from pytest_django.fixtures import Settings

from django_rqueue.engine import workflow_calls
from django_rqueue.engine import workflow_record as record
from django_rqueue.engine.queue_ref import queue_ref
from django_rqueue.engine.run import execute
from django_rqueue.engine.values import as_text
from django_rqueue.job import get_job
from django_rqueue.worker.poller import Poller
from django_rqueue.workflows import WorkflowState, chain, control, get_workflow, graph
from django_rqueue.workflows.staged import Creation
from tests.support import workflows as wf
from tests.workflows.jobs import fetch, parse, store


def past_deadline(client: redis.Redis, workflow_id: str) -> None:
    opening = queue_ref("default").keys.opening
    assert client.zscore(opening, workflow_id) is not None
    client.zadd(opening, {workflow_id: 0})


def test_a_stalled_creation_is_rolled_back_by_the_poller(
    rqueue_redis: redis.Redis, settings: Settings, caplog: pytest.LogCaptureFixture
):
    settings.RQUEUE = {**settings.RQUEUE, "WORKFLOW_FORCE_OUTBOX": True}
    plan = graph.compile(chain(fetch.s("a"), parse.s()))
    creation = Creation(plan)
    creation.open()
    creation.write_nodes()
    Poller(["default"]).sweep_openings()
    assert get_workflow(plan.id) is not None  # within its grace: left alone
    past_deadline(rqueue_redis, plan.id)
    with caplog.at_level(logging.WARNING, logger="django_rqueue.poller"):
        Poller(["default"]).sweep_openings()
    assert get_workflow(plan.id) is None
    assert [get_job(n.id) for n in plan.nodes] == [None, None]
    assert "finished or undid 1 stalled workflow creation(s)" in caplog.text


def test_a_stalled_retry_failed_is_completed_by_the_poller(rqueue_redis: redis.Redis):
    plan = wf.create(chain(fetch.s("a"), parse.s(), store.s()))
    ids = [n.id for n in plan.nodes]
    wf.succeed(ids[0], '"a b"')
    wf.fail(ids[1])
    wf.relay()
    wf.finish(plan)
    home = queue_ref(plan.home)
    raw = home.client().hgetall(home.keys.workflow(plan.id))
    planned = control.plan_retry(plan.id, {as_text(k): v for k, v in raw.items()})
    reopen = record.reopen(home.keys, plan.id, control.REOPEN_GRACE_MS, planned.to_json())
    assert execute(home.client(), reopen).done  # ... and its caller was killed here
    step = workflow_calls.wf_rearm(home.keys, planned.deadline_ms, planned.arms[:1])
    assert execute(home.client(), step) == [True]
    past_deadline(rqueue_redis, plan.id)
    Poller(["default"]).sweep_openings()
    assert (wf.state(ids[0]), wf.state(ids[1]), wf.state(ids[2])) == (
        "succeeded",
        "queued",
        "waiting",
    )
    handle = get_workflow(plan.id)
    assert handle is not None and handle.state is WorkflowState.RUNNING
    assert rqueue_redis.zscore(home.keys.opening, plan.id) is None
