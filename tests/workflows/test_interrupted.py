"""A creation interrupted half-way by a real SIGKILL: the pollers roll it back (nothing of it is
left, nothing ran) or forward (every node runs once).

The creator is a separate process (:mod:`tests.support.interrupted`) that kills itself after
a chosen step of a staged workflow creation, of a ``.delay()`` with ``depends_on``, or of a
``retry_failed()``; its graces are one second. This process then runs what the pollers and
workers do (poller rounds that sweep every time, worker bursts) until the outcome shows.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis

from django_rqueue.conf import get_config
from django_rqueue.engine.connection import as_text, get_client
from django_rqueue.engine.fields import WorkflowFields
from django_rqueue.job import JobStatus, get_job
from django_rqueue.worker import poller as poller_module
from django_rqueue.worker.poller import Poller
from django_rqueue.workflows import WorkflowState, chain, get_workflow
from tests.jobs_app.jobs import fail_then_succeed, record
from tests.support import redis_acl
from tests.support.inprocess import keys, run_worker, tags
from tests.support.interrupted import run_creator
from tests.support.waiting import wait_until

pytestmark = pytest.mark.usefixtures("worker_may_close_db_connections")

QUEUES = ("default", "emails", "low")


@dataclass
class Where:
    """Where the creator's workflow goes: the creator's keywords
    (:func:`~tests.support.interrupted.run_creator`) and an admin client of each Redis."""

    creator: dict[str, Any]
    servers: list[redis.Redis]


@pytest.fixture(params=["forced", "two-servers"])
def where(request: pytest.FixtureRequest, rqueue_redis: redis.Redis) -> Iterator[Where]:
    """How the creator's workflow is staged: ``forced`` on one Redis
    (``WORKFLOW_FORCE_OUTBOX``), or ``two-servers``: the queue ``emails`` on a second Redis
    (for this process and for the creator), which stages a creation by itself."""
    if request.param == "forced":
        yield Where({}, [rqueue_redis])
        return
    server = request.getfixturevalue("other_redis_server")
    url = server.url
    if redis_acl.enabled():
        url = redis_acl.as_acl_user(url)
    options = json.dumps({"emails": {"REDIS_URL": url}})
    creator = {"force": False, "env": {"RQUEUE_TEST_QUEUE_OPTIONS": options}}
    with server.client() as other:
        yield Where(creator, [rqueue_redis, other])


@pytest.fixture
def poller(monkeypatch: pytest.MonkeyPatch) -> Iterator[Poller]:
    """A poller whose every round also sweeps stalled creations (``TRIM_EVERY`` 0)."""
    monkeypatch.setattr(poller_module, "TRIM_EVERY", 0.0)
    yield Poller(list(QUEUES))


def drive(poller: Poller, done: Callable[[], object], message: str, timeout: float = 15) -> None:
    """Worker bursts and poller rounds until ``done()``."""

    def step() -> object:
        run_worker(QUEUES, burst=True)
        poller.run_once()
        return done()

    wait_until(step, timeout=timeout, interval=0.05, message=message)


def keys_naming(servers: list[redis.Redis], ids: list[str]) -> list[str]:
    """Every key whose name holds one of ``ids`` (random parts: no false match) on
    ``servers`` (admin clients: the package's least-privilege user may not ``SCAN``)."""
    parts = [i.partition(":")[2] for i in ids]
    found: set[str] = set()
    for server in servers:
        for raw in server.scan_iter(match=f"{get_config().key_prefix}:*", count=1000):
            key = as_text(raw)
            if any(part in key for part in parts):
                found.add(key)
    return sorted(found)


def record_state(workflow_id: str) -> str | None:
    """The ``st`` of a workflow's record (``None``: gone)."""
    home = workflow_id.partition(":")[0]
    value = get_client(home).hget(keys(home).workflow(workflow_id), WorkflowFields.STATE)
    return None if value is None else as_text(value)


def mentioned(client: redis.Redis, ids: list[str]) -> list[str]:
    """Members of the per-queue sets that name one of ``ids`` (waiting, wfs, wfopen)."""
    found = []
    for queue in QUEUES:
        k = keys(queue)
        for key in (k.waiting, k.workflows, k.opening):
            raw: list[bytes] = get_client(queue).zrange(key, 0, -1)  # type: ignore[assignment]
            members = {as_text(m) for m in raw}
            found += [f"{key} {m}" for m in members if m in ids]
    return found


@pytest.mark.parametrize("crash", ["open", "write_nodes"])
def test_a_creation_killed_before_its_commit_is_rolled_back_and_nothing_runs(
    rqueue_redis: redis.Redis, ledger: str, poller: Poller, crash: str, where: Where
) -> None:
    made = run_creator("workflow", crash, ledger, **where.creator)
    every = [made["workflow"], *made["jobs"]]
    home = made["workflow"].partition(":")[0]
    assert record_state(made["workflow"]) == "creating"
    assert (keys_naming(where.servers, made["jobs"]) != []) == (crash == "write_nodes")

    drive(
        poller,
        lambda: not keys_naming(where.servers, every) and not mentioned(rqueue_redis, every),
        "the creation was not rolled back",
    )
    run_worker(QUEUES, burst=True)
    assert tags(ledger) == []  # nothing ran
    assert get_workflow(made["workflow"]) is None
    assert rqueue_redis.zcard(keys(home).opening) == 0


@pytest.mark.parametrize("crash", ["commit", "open_gates"])
def test_a_creation_killed_after_its_commit_is_rolled_forward_and_runs_once(
    rqueue_redis: redis.Redis, ledger: str, poller: Poller, crash: str, where: Where
) -> None:
    made = run_creator("workflow", crash, ledger, **where.creator)
    assert record_state(made["workflow"]) == "running"
    if crash == "commit":  # its sources are still gated: nothing runs before the sweep
        run_worker(QUEUES, burst=True)
        assert tags(ledger) == []

    def finished() -> bool:
        found = get_workflow(made["workflow"])
        return found is not None and found.state is not WorkflowState.RUNNING

    drive(poller, finished, "the creation was not rolled forward")
    found = get_workflow(made["workflow"])
    assert found is not None and found.state is WorkflowState.SUCCEEDED
    assert found.result == ["a", "b"]
    assert sorted(tags(ledger)) == ["a", "b", "gather"]  # every node once
    assert rqueue_redis.zcard(keys(made["workflow"].partition(":")[0]).opening) == 0


@pytest.mark.parametrize("crash", ["create", "link"])
def test_a_depends_on_delay_killed_before_its_gate_opens_is_deleted_and_never_runs(
    rqueue_redis: redis.Redis, ledger: str, poller: Poller, crash: str
) -> None:
    parent = record.delay(ledger, "parent")
    made = run_creator("depends_on", crash, ledger, parent=parent.id)
    child = made["job"]
    found = get_job(child)
    assert found is not None and found.status is JobStatus.WAITING

    def over() -> bool:
        ended = get_job(parent.id)
        return (
            get_job(child) is None
            and ended is not None
            and ended.status == "succeeded"
            and not any(rqueue_redis.xlen(keys(q).outbox) for q in QUEUES)
        )

    drive(poller, over, "the gated job was not deleted")
    assert tags(ledger) == ["parent"]  # the child never ran
    assert keys_naming([rqueue_redis], [child]) == []
    assert mentioned(rqueue_redis, [child]) == []
    assert not list(rqueue_redis.scan_iter(match="*:next:*"))


@pytest.mark.parametrize("crash", ["reopen", "rearm"])
def test_a_retry_failed_killed_half_way_is_completed_by_the_pollers(
    rqueue_redis: redis.Redis, ledger: str, poller: Poller, crash: str
) -> None:
    flaky = fail_then_succeed.s(ledger, "flaky", 1).using(max_attempts=1)
    workflow = chain(flaky, record.si(ledger, "after")).delay()

    def ended(state: WorkflowState) -> Callable[[], bool]:
        def check() -> bool:
            found = get_workflow(workflow.id)
            return found is not None and found.state is state

        return check

    drive(poller, ended(WorkflowState.FAILED), "the workflow did not fail")
    run_creator("retry", crash, ledger, workflow=workflow.id)
    assert record_state(workflow.id) == "reopening"

    drive(poller, ended(WorkflowState.SUCCEEDED), "the retry was not completed")
    assert tags(ledger) == ["flaky", "flaky", "after"]  # the failed node again, then its dependent
    assert rqueue_redis.zcard(keys().opening) == 0
