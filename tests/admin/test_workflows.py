"""The admin's workflow pages (issue 26): a queue's workflows, a workflow's graph, its cancel
and "retry failed", and what a member's job page says of its workflow, on the Redis state
the real transition scripts write (``tests/support/workflows.py`` runs the nodes)."""

from __future__ import annotations

import re
from typing import Any

import pytest
import redis
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.admin.utils import quote as admin_quote
from django.test import Client

from django_rqueue.engine.fields import JobFields
from django_rqueue.engine.keys import finisher_id
from django_rqueue.engine.queue_ref import queue_ref
from django_rqueue.workflows import chain, chord
from django_rqueue.workflows.nodes import WorkflowPlan
from tests.support import workflows as wf
from tests.support.jobs_in_state import Jobs
from tests.workflows.jobs import add, fetch, noop, note, parse, store, summarize

from .conftest import BASE, MakeClient
from .test_actions import messages_of
from .test_pages import job_url


def workflow_url(workflow_id: str, action: str = "") -> str:
    path = f"{BASE}workflows/{admin_quote(workflow_id)}/"
    return f"{path}{action}/" if action else path


def failed_chain() -> tuple[WorkflowPlan, list[str]]:
    """fetch -> parse -> store whose fetch failed (the others cancelled by it), finished."""
    plan = wf.create(chain(fetch.s("a"), parse.s(), store.s()))
    ids = [n.id for n in plan.nodes]
    wf.fail(ids[0])
    wf.relay()
    wf.finish(plan)
    return plan, ids


def nodes_of(response: Any) -> dict[str, dict[str, Any]]:
    return {n["id"]: n for _layer, nodes in response.context["layers"] for n in nodes}


# -- the list ----------------------------------------------------------------------------


def test_the_list_shows_name_state_progress_and_age_newest_first(admin_client_rq: Client):
    failed, _ids = failed_chain()
    running = wf.create(chain(fetch.s("a"), parse.s(), store.s()))
    wf.succeed(running.nodes[0].id, '"a b"')

    response = admin_client_rq.get(f"{BASE}queues/default/workflows/")

    assert response.status_code == 200
    rows = response.context["rows"]
    assert [r["id"] for r in rows] == [running.id, failed.id]
    assert [r["state"] for r in rows] == ["running", "failed"]
    # n / ok / failed / cancelled, from the finisher's counts.
    assert [r["progress"] for r in rows] == ["3 / 1 / 0 / 0", "3 / 0 / 1 / 2"]
    assert rows[0]["name"] == store.name and rows[0]["created_at"] is not None
    assert rows[0]["finished_at"] is None and rows[1]["finished_at"] is not None
    assert f'href="{workflow_url(running.id)}"' in response.text
    assert ("workflows", f"{BASE}queues/default/workflows/") in response.context["states"]


def test_the_list_filters_its_page_by_state(admin_client_rq: Client):
    failed, _ids = failed_chain()
    wf.create(chain(fetch.s("a"), parse.s()))

    only_failed = admin_client_rq.get(f"{BASE}queues/default/workflows/?state=failed")
    nonsense = admin_client_rq.get(f"{BASE}queues/default/workflows/?state=nonsense")

    assert [r["id"] for r in only_failed.context["rows"]] == [failed.id]
    assert len(nonsense.context["rows"]) == 2  # an unknown state filters nothing


def test_the_list_finds_a_workflow_by_id_with_or_without_its_queue(admin_client_rq: Client):
    wanted = wf.create(chain(fetch.s("a"), parse.s()))
    wf.create(chain(fetch.s("b"), parse.s()))

    full = admin_client_rq.get(f"{BASE}queues/default/workflows/", {"id": wanted.id})
    bare = admin_client_rq.get(
        f"{BASE}queues/default/workflows/", {"id": wanted.id.partition(":")[2]}
    )
    unknown = admin_client_rq.get(f"{BASE}queues/default/workflows/", {"id": "default:nope"})

    assert [r["id"] for r in full.context["rows"]] == [wanted.id]
    assert [r["id"] for r in bare.context["rows"]] == [wanted.id]
    assert unknown.context["rows"] == [] and "No workflow has this id" in unknown.text


def test_the_list_pages(admin_client_rq: Client, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr("django_rqueue.admin.workflows.PAGE_SIZE", 2)
    created = [wf.create(chain(noop.si(), noop.si())).id for _ in range(5)]

    pages = [admin_client_rq.get(f"{BASE}queues/default/workflows/?page={n}") for n in (1, 2, 3)]

    listed = [[r["id"] for r in p.context["rows"]] for p in pages]
    times = [r["created_at"] for p in pages for r in p.context["rows"]]
    assert [len(ids) for ids in listed] == [2, 2, 1]
    assert sorted(i for ids in listed for i in ids) == sorted(created)
    assert times == sorted(times, reverse=True)  # newest first (ties: same millisecond)
    assert pages[0].context["page_obj"].paginator.count == 5


def test_the_overview_and_the_job_lists_link_to_the_workflows(admin_client_rq: Client):
    overview = admin_client_rq.get(BASE)
    listing = admin_client_rq.get(f"{BASE}queues/default/failed/")

    assert f'href="{BASE}queues/default/workflows/"' in overview.text
    assert f'href="{BASE}queues/default/workflows/"' in listing.text


# -- a workflow's page -------------------------------------------------------------------


def test_a_chord_is_drawn_in_two_layers_coloured_by_state(admin_client_rq: Client):
    plan = wf.create(chord([add.s(1, 1), add.s(2, 2)], summarize.s()))
    first, second, body = (n.id for n in plan.nodes)
    wf.succeed(first, "2")

    response = admin_client_rq.get(workflow_url(plan.id))

    assert response.status_code == 200
    layers = response.context["layers"]
    assert [(n, [node["id"] for node in nodes]) for n, nodes in layers] == [
        (0, [first, second]),
        (1, [body]),
    ]
    nodes = nodes_of(response)
    assert [nodes[i]["class"] for i in (first, second, body)] == [
        "succeeded",
        "queued",
        "waiting",
    ]
    assert [i["id"] for i in nodes[body]["inputs"]] == [first, second]
    # The body waits for the member that has not ended, and names its state.
    assert [(i["id"], i["state"]) for i in nodes[body]["waits_for"]] == [(second, "queued")]
    assert nodes[body]["missing"] == 1
    waits = re.search(r'<div class="rq-waits">(.*?)</div>', response.text, re.S)
    assert waits is not None and second in waits[1] and first not in waits[1]
    assert 'class="rq-node rq-s-waiting" id="rq-node-2"' in response.text
    assert f'href="{job_url(body)}"' in response.text
    # Small: the links are drawn (two lines, three dots).
    drawn = response.context["map"]
    assert (len(drawn["lines"]), len(drawn["dots"])) == (2, 3)
    assert response.text.count('<line class="rq-link"') == 2
    assert response.context["progress"] == "3 / 1 / 0 / 0"


def test_a_chain_has_one_layer_per_node_and_its_result_once_it_succeeded(
    admin_client_rq: Client,
):
    plan = wf.create(chain(fetch.s("a b"), parse.s(), store.s()).on_complete(note.si("done")))
    ids = [n.id for n in plan.nodes]
    for node_id, result in zip(ids, ['"a b"', '["a","b"]', "2"], strict=True):
        wf.succeed(node_id, result)
    home = queue_ref(plan.home)
    wf.finish(plan)
    home.client().hset(home.keys.workflow(plan.id), "res", "2")  # what the finisher stores

    response = admin_client_rq.get(workflow_url(plan.id))

    assert [n for n, _nodes in response.context["layers"]] == [0, 1, 2]
    assert [n["class"] for n in nodes_of(response).values()] == ["succeeded"] * 3
    assert response.context["workflow"].state == "succeeded"
    assert response.context["result"] == "2"
    callbacks = response.context["callbacks"]
    assert [(c["which"], c["id"]) for c in callbacks] == [
        ("on_complete", f"default:{plan.id.partition(':')[2]}.c0")
    ]
    assert response.context["actions"] == []  # nothing to cancel or retry


def test_a_failed_workflow_shows_why_and_offers_retry_failed_only(admin_client_rq: Client):
    plan, ids = failed_chain()

    response = admin_client_rq.get(workflow_url(plan.id))

    nodes = nodes_of(response)
    assert [nodes[i]["class"] for i in ids] == ["failed", "cancelled", "cancelled"]
    assert [nodes[i]["reason"] for i in ids[1:]] == ["dependency_failed"] * 2
    assert [nodes[i]["attempts"] for i in ids] == ["1/3", "", ""]  # the others never ran
    assert [a[0] for a in response.context["actions"]] == ["retry-failed"]
    assert response.context["progress"] == "3 / 0 / 1 / 2"
    assert response.context["finisher"]["state"] == "succeeded"


def test_a_node_whose_input_ended_but_whose_outcome_is_still_in_the_outbox_says_so(
    admin_client_rq: Client, settings: Any
):
    settings.RQUEUE = {**settings.RQUEUE, "WORKFLOW_FORCE_OUTBOX": True}
    plan = wf.create(chain(fetch.s("a"), parse.s()))
    first, second = (n.id for n in plan.nodes)
    wf.succeed(first, '"a"')  # its outcome waits in the outbox: no relay yet

    page = admin_client_rq.get(workflow_url(plan.id))
    before = nodes_of(page)[second]
    wf.relay()
    after = nodes_of(admin_client_rq.get(workflow_url(plan.id)))[second]

    assert (before["class"], before["waits_for"], before["missing"]) == ("waiting", [], 1)
    assert "waits for: the outcomes of its ended inputs to be delivered" in page.text
    assert after["class"] == "queued"


def test_an_unknown_workflow_is_a_404(admin_client_rq: Client):
    assert admin_client_rq.get(workflow_url("default:" + "x" * 22)).status_code == 404
    assert admin_client_rq.get(workflow_url("nowhere:" + "x" * 22)).status_code == 404


def test_a_1000_node_workflow_page_reads_at_most_500_nodes(
    admin_client_rq: Client, rqueue_redis: redis.Redis
):
    plan = wf.create(chord([noop.si() for _ in range(1000)], summarize.s()))
    body = plan.nodes[-1].id
    admin_client_rq.get(workflow_url(plan.id))  # warm up: session, templates

    rqueue_redis.config_resetstat()
    response = admin_client_rq.get(workflow_url(plan.id))
    stats = rqueue_redis.info("commandstats")

    assert response.status_code == 200
    shown = nodes_of(response)
    assert len(shown) == 500 and response.context["window"].cut == 500
    assert response.context["map"] is None  # too many for the map
    calls = {name.removeprefix("cmdstat_"): s["calls"] for name, s in stats.items()}
    # One HGETALL (the record), one small HMGET per node shown plus the finisher; nothing else
    # reads a job (info and config are this test's own).
    assert calls.pop("hgetall") == 1
    assert calls.pop("hmget") == 501
    assert set(calls) <= {"info", "config|resetstat", "config", "exists"}, calls
    # The next page is the body, alone, its 1000 inputs counted, 10 listed.
    later = admin_client_rq.get(workflow_url(plan.id), {"layer": 1})
    (only,) = nodes_of(later).values()
    assert only["id"] == body and len(only["inputs"]) == 10 and only["more_inputs"] == 990
    assert later.context["window"].previous_layer == 0


# -- actions -----------------------------------------------------------------------------


def test_cancel_confirms_then_cancels_and_logs(admin_client_rq: Client):
    plan = wf.create(chain(fetch.s("a"), parse.s(), store.s()))
    ids = [n.id for n in plan.nodes]
    wf.reserve(ids[0])  # running: asked to stop, it ends cancelled once its worker stops it

    page = admin_client_rq.get(workflow_url(plan.id))
    confirm = admin_client_rq.get(workflow_url(plan.id, "cancel"))
    done = admin_client_rq.post(workflow_url(plan.id, "cancel"))

    assert [a[0] for a in page.context["actions"]] == ["cancel"]
    assert confirm.status_code == 200 and f"Cancel workflow {plan.id}?" in confirm.text
    assert done.status_code == 302 and done["Location"] == workflow_url(plan.id)
    assert wf.state(ids[0]) == "running" and wf.job(ids[0])[JobFields.CANCEL_BY_WORKFLOW] == "1"
    assert [wf.job(i)[JobFields.CANCEL_REASON] for i in ids[1:]] == ["workflow_cancelled"] * 2
    assert wf.record(plan)["st"] == "cancelling"
    said = messages_of(done)
    assert any("2 nodes cancelled, 1 running node asked to stop" in m for m in said)
    shown = admin_client_rq.get(workflow_url(plan.id))
    assert shown.context["state_label"] == "running (cancel requested)"
    entry = LogEntry.objects.get(object_id=plan.id)
    assert entry.action_flag == CHANGE and "cancel requested" in entry.change_message


def test_retry_failed_confirms_then_retries_and_logs(admin_client_rq: Client):
    plan, ids = failed_chain()

    confirm = admin_client_rq.get(workflow_url(plan.id, "retry-failed"))
    done = admin_client_rq.post(workflow_url(plan.id, "retry-failed"))

    assert confirm.status_code == 200 and "Retry the failed nodes" in confirm.text
    assert done.status_code == 302
    assert [wf.state(i) for i in ids] == ["queued", "waiting", "waiting"]
    assert wf.state(finisher_id(plan.id)) == "waiting"
    said = messages_of(done)
    assert any("1 node queued again, 2 nodes wait to run after them" in m for m in said)
    entry = LogEntry.objects.get(object_id=plan.id)
    assert "failed nodes retried" in entry.change_message


def test_an_action_the_state_refuses_says_why_and_changes_nothing(admin_client_rq: Client):
    plan, ids = failed_chain()
    running = wf.create(chain(fetch.s("a"), parse.s()))

    cancel = admin_client_rq.post(workflow_url(plan.id, "cancel"))
    retry = admin_client_rq.post(workflow_url(running.id, "retry-failed"))

    assert cancel.status_code == 302 and retry.status_code == 302
    assert any("left alone" in m and "failed" in m for m in messages_of(cancel))
    assert any("still running" in m for m in messages_of(retry))
    assert wf.record(plan)["st"] == "failed" and wf.state(ids[0]) == "failed"
    assert not LogEntry.objects.exists()


def test_a_view_only_user_sees_the_pages_but_cannot_act(make_client: MakeClient):
    plan, ids = failed_chain()
    viewer = make_client("view_job")
    changer = make_client("view_job", "change_job")

    page = viewer.get(workflow_url(plan.id))

    assert page.status_code == 200 and page.context["actions"] == []
    assert viewer.get(f"{BASE}queues/default/workflows/").status_code == 200
    for action in ("cancel", "retry-failed"):
        assert viewer.get(workflow_url(plan.id, action)).status_code == 403
        assert viewer.post(workflow_url(plan.id, action)).status_code == 403
    # change_job retries; cancelling needs delete_job, as a job's cancel does.
    assert changer.post(workflow_url(plan.id, "cancel")).status_code == 403
    assert changer.post(workflow_url(plan.id, "retry-failed")).status_code == 302
    assert wf.state(ids[0]) == "queued"
    assert make_client(staff=True).get(workflow_url(plan.id)).status_code == 403


def test_csrf_is_enforced_on_workflow_actions(make_client: MakeClient):
    plan, ids = failed_chain()
    client = make_client(superuser=True, csrf=True)

    refused = client.post(workflow_url(plan.id, "retry-failed"))
    page = client.get(workflow_url(plan.id, "retry-failed"))
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert refused.status_code == 403 and wf.state(ids[0]) == "failed"
    assert token is not None
    done = client.post(workflow_url(plan.id, "retry-failed"), {"csrfmiddlewaretoken": token[1]})
    assert done.status_code == 302 and wf.state(ids[0]) == "queued"


# -- a member's job page -----------------------------------------------------------------


def test_a_members_page_links_its_workflow_inputs_and_dependents(admin_client_rq: Client):
    plan = wf.create(chord([add.s(1, 1), add.s(2, 2)], summarize.s()))
    first, second, body = (n.id for n in plan.nodes)
    wf.succeed(first, "2")

    member = admin_client_rq.get(job_url(first))
    waiting = admin_client_rq.get(job_url(body))
    finisher = admin_client_rq.get(job_url(finisher_id(plan.id)))

    links = member.context["links"]
    assert links["workflow"]["id"] == plan.id and "a node of" in links["workflow"]["role"]
    assert f'href="{workflow_url(plan.id)}"' in member.text
    # The body, and the finisher (it waits for every node).
    assert [(d["id"], d["state"]) for d in links["dependents"]] == [
        (body, "waiting"),
        (finisher_id(plan.id), "waiting"),
    ]
    inputs = waiting.context["links"]["inputs"]
    assert [(i["id"], i["state"], i["arrival"]) for i in inputs] == [
        (first, "succeeded", "arrived: succeeded"),
        (second, "queued", "not arrived"),
    ]
    assert waiting.context["links"]["missing"] == 1
    assert "the finisher of" in finisher.context["links"]["workflow"]["role"]
    assert finisher.context["links"]["every_node"]


def test_a_plain_jobs_page_has_no_workflow_part(admin_client_rq: Client, jobs: Jobs):
    job_id = jobs.failed()

    response = admin_client_rq.get(job_url(job_id))

    assert response.status_code == 200
    assert response.context["links"] is None and 'id="rq-links"' not in response.text


def test_the_page_of_a_body_with_1100_arrived_inputs_reads_100_of_them(
    admin_client_rq: Client, rqueue_redis: redis.Redis
):
    plan = wf.create(chord([noop.si() for _ in range(1100)], summarize.s()))
    body = plan.nodes[-1].id
    for member in plan.nodes[:-1]:
        wf.succeed(member.id)
    assert wf.state(body) == "queued" and len(wf.job(body)) > 1100  # every arrival is there
    admin_client_rq.get(job_url(body))  # warm up: session, templates

    rqueue_redis.config_resetstat()
    response = admin_client_rq.get(job_url(body))
    stats = rqueue_redis.info("commandstats")

    assert response.status_code == 200 and response.context["job"].status == "queued"
    links = response.context["links"]
    assert len(links["inputs"]) == 100 and links["more_inputs"] == 1000
    assert {i["arrival"] for i in links["inputs"]} == {"arrived: succeeded"}
    calls = {name.removeprefix("cmdstat_"): s["calls"] for name, s in stats.items()}
    assert "hgetall" not in calls and calls["hlen"] == 1
    # Two reads of the body itself, then one small read per input and dependent listed.
    assert calls["hmget"] == 2 + 100 + 1
