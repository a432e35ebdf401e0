"""Workflows on a Redis Cluster: one slot is created live (one MULTI on its master), two
slots staged; both run to the end."""

from __future__ import annotations

import pytest
from redis.crc import key_slot

from django_rqueue.workflows import WorkflowState, chain, chord, get_workflow, graph
from tests.support.inprocess import keys
from tests.support.redis_cluster import LocalCluster
from tests.support.relay import run_until_settled
from tests.workflows.jobs import add, collect, double

pytestmark = pytest.mark.usefixtures("worker_may_close_db_connections")


def test_a_workflow_on_one_slot_is_created_live_and_runs(redis_cluster: LocalCluster):
    assert graph.compile(chain(add.s(1, 2), double.s())).path == "live"

    wf = chain(add.s(1, 2), double.s()).delay()

    run_until_settled()
    assert wf.wait(5).result == 6


def test_a_workflow_on_two_slots_is_staged_and_runs(redis_cluster: LocalCluster):
    header = [add.s(1, 1), add.s(2, 2).using(queue="emails")]
    assert graph.compile(chord(header, collect.s())).path == "staged"

    wf = chord(header, collect.s()).delay()

    run_until_settled()
    assert wf.wait(5).result == [2, 4]
    found = get_workflow(wf.id)
    assert found is not None and found.state is WorkflowState.SUCCEEDED


def test_a_live_creation_follows_its_slot_to_a_new_master(redis_cluster: LocalCluster):
    chain(add.s(1, 2), double.s()).delay()  # the client knows the slot's master now
    slot = key_slot(keys().base.encode())
    redis_cluster.move_slot(slot, (redis_cluster.node_of(slot) + 1) % 3, batch=None)

    wf = chain(add.s(2, 3), double.s()).delay()  # MOVED, the slot map read again, sent again

    run_until_settled()
    assert wf.wait(5).result == 10
