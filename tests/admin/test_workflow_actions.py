"""The admin's retry of a failed workflow node retries its workflow, and says so."""

from __future__ import annotations

from django.contrib.admin.models import CHANGE, LogEntry
from django.test import Client

from tests.support import workflows as wf
from tests.workflows.jobs import fetch, parse, store

from .test_actions import messages_of
from .test_pages import job_url


def test_retrying_a_failed_node_retries_its_workflow_and_logs_it(admin_client_rq: Client):
    plan = wf.create(fetch.s("a") | parse.s() | store.s())
    first, second, third = (n.id for n in plan.nodes)
    wf.fail(first)
    wf.relay()
    wf.finish(plan)
    done = admin_client_rq.post(job_url(first, "retry"))
    assert done.status_code == 302
    assert (wf.state(first), wf.state(second), wf.state(third)) == ("queued", "waiting", "waiting")
    said = [m for m in messages_of(done) if f"part of workflow {plan.id}" in m]
    assert said and "2 node(s) they had cancelled will run after them" in said[0]
    entry = LogEntry.objects.get(object_id=first)
    assert entry.action_flag == CHANGE and plan.id in entry.change_message


def test_a_node_of_a_running_workflow_is_not_retried_and_the_page_says_why(
    admin_client_rq: Client,
):
    plan = wf.create(fetch.s("a") | parse.s())
    first = plan.nodes[0].id
    wf.fail(first)
    refused = admin_client_rq.post(job_url(first, "retry"))
    assert refused.status_code == 302
    assert wf.state(first) == "failed"
    assert any("still running" in m for m in messages_of(refused))
    assert not LogEntry.objects.exists()
