"""Workflows run by a real ``rqueue_work`` process: its children run the nodes and the
finisher, its poller relays the outbox between queues; nothing is driven by hand."""

from __future__ import annotations

import redis

from django_rqueue.workflows import WorkflowState, chord
from tests.jobs_app.jobs import fail_always, gather, read_ledger, record
from tests.management.commands.conftest import Manage
from tests.management.commands.test_rqueue_work import wait_serving
from tests.workflows.conftest import DepPath


def test_a_chord_across_two_queues_runs_to_its_end(
    manage: Manage, ledger: str, rqueue_redis: redis.Redis, dep_path: DepPath
):
    worker = manage("rqueue_work", "--queues", "default,emails", "--concurrency", "2")
    wait_serving(worker, rqueue_redis)
    members = [record.s(ledger, f"m{i}").using(queue="emails") for i in range(5)]
    wf = chord(members, gather.s(ledger)).delay()
    done = wf.wait(30)
    assert done.state is WorkflowState.SUCCEEDED, worker.report()
    assert done.result == [f"m{i}" for i in range(5)]
    bodies = [e for e in read_ledger(ledger) if e["tag"] == "gather"]
    assert len(bodies) == 1 and bodies[0]["results"] == done.result
    assert [j.status for j in done.jobs] == ["succeeded"] * 6


def test_a_failing_member_cancels_the_body_and_fails_the_workflow(
    manage: Manage, ledger: str, rqueue_redis: redis.Redis, dep_path: DepPath
):
    worker = manage("rqueue_work", "--queues", "default,emails")
    wait_serving(worker, rqueue_redis)
    members = [record.s(ledger, "ok"), fail_always.s(ledger, "bad").using(max_attempts=1)]
    wf = chord(members, gather.s(ledger)).delay()
    done = wf.wait(30)
    assert done.state is WorkflowState.FAILED, worker.report()
    statuses = [j.status for j in done.jobs]
    assert statuses == ["succeeded", "failed", "cancelled"]
    assert done.jobs[2].cancel_reason == "dependency_failed"
    assert not [e for e in read_ledger(ledger) if e["tag"] == "gather"]
