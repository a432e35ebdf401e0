"""Every key of a workflow is gone after its TTLs: a SCAN of the whole prefix finds no leftover.

Every queue keeps results and failures one second (``result_ttl``, ``failed_ttl``). On both
paths, workflows of every shape and end run to the end in this process (worker bursts and
poller rounds): successes (a chain, a chord across two queues with ``on_complete``, a group
holding a chain), failures under both policies (with ``on_error``/``on_complete``), a
cancel, a dependency timeout, a ``retry_failed()`` that then succeeds, ``depends_on`` on a
finished and on an unfinished job, a creation rolled back, and (their creator SIGKILLed,
:mod:`tests.support.interrupted`) a creation rolled forward and a ``depends_on`` job whose
gate never opened. Once every workflow is final and the TTLs have passed, poller rounds
apply the failed-store retention and forget the gone workflows; then no ``job:``, ``wf:``,
``next:``, ``done:``, ``reservation:`` or ``unique:`` key is left, no ``waiting`` or
``wfopen``, ``wfs`` is empty and so is every ``outbox``; what remains is what plain jobs
leave too (counters, the ``succeeded`` index trimmed by rank, wake-up lists). Someone waits
for one workflow (``Workflow.wait()``), so its finisher's ``done:`` list is made too: like
any awaited job's, it may outlive the TTLs, by at most a minute, expiring by itself
(checked: its TTL is set and at most 60 s).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from pytest_django.fixtures import Settings

from django_rqueue import signals
from django_rqueue.conf import get_config
from django_rqueue.engine.connection import get_client
from django_rqueue.engine.keys import QueueKeys
from django_rqueue.job import Job, get_job
from django_rqueue.worker import poller as poller_module
from django_rqueue.worker.poller import Poller
from django_rqueue.workflows import Workflow, WorkflowState, chain, chord, graph, group
from django_rqueue.workflows.recovery import sweep_opening
from django_rqueue.workflows.staged import Creation
from tests.jobs_app.jobs import fail_then_succeed
from tests.support import transitions
from tests.support.inprocess import run_worker
from tests.support.interrupted import run_creator
from tests.support.waiting import wait_until
from tests.workflows.conftest import DepPath
from tests.workflows.jobs import add, collect, double, explode, note, summarize

pytestmark = pytest.mark.usefixtures("worker_may_close_db_connections")

QUEUES = ("default", "emails", "low")
#: Key suffixes (after ``<prefix>:{<queue>}:``) that plain jobs leave behind too.
PER_QUEUE = {"stats", "throughput", "durations", "succeeded", "outbox", "notify", "wake"}
#: Seconds a ``done:<id>`` wake-up list lives after the job's end (``include/wake_waiters.lua``):
#: a waiter that was woken passes the token on, and it stays until then, whatever the TTLs.
WAKE_TTL = 60
#: Keys a workflow must never leave behind (prefixes of the part after the queue's tag).
NEVER = ("job:", "wf:", "next:", "done:", "reservation:", "unique:", "waiting", "wfopen")


@pytest.fixture(autouse=True)
def short_ttls(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    queues = dict(settings.RQUEUE["QUEUES"])
    for name in QUEUES:
        queues[name] = {**queues.get(name, {}), "result_ttl": 1, "failed_ttl": 1}
    settings.RQUEUE = {**settings.RQUEUE, "QUEUES": queues}
    monkeypatch.setattr(poller_module, "TRIM_EVERY", 0.0)  # every round trims and sweeps


def keys(queue: str) -> QueueKeys:
    return QueueKeys.of(get_config().key_prefix, queue)


def text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def run_round(poller: Poller) -> None:
    """Run what can run (a worker burst on every queue), then one poller round."""
    run_worker(QUEUES, burst=True)
    poller.run_once()


def run_until(poller: Poller, done: Callable[[], bool], message: str, timeout: float = 15) -> None:
    def step() -> bool:
        run_round(poller)
        return done()

    wait_until(step, timeout=timeout, interval=0.05, message=message)


def leftovers(client: redis.Redis) -> list[str]:
    """Keys a workflow or a job must not leave behind, and non-empty outboxes / ``wfs``."""
    prefix = get_config().key_prefix
    found: list[str] = []
    for raw in client.scan_iter(match=f"{prefix}:*", count=1000):
        key = text(raw)
        rest = key.partition("}:")[2] if "}:" in key else ""
        if rest.startswith("done:") and 0 < client.ttl(key) <= WAKE_TTL:
            continue  # a Job.wait wake-up token passed on to other waiters: expires by itself
        if rest.startswith(NEVER):
            found.append(key)
        elif rest in ("outbox", "wfs") and (
            client.xlen(key) if rest == "outbox" else client.zcard(key)
        ):
            found.append(f"{key} (not empty)")
        elif rest and rest not in PER_QUEUE:
            found.append(f"{key} (unexpected)")
    return sorted(found)


def start_every_shape(ledger: str) -> tuple[list[Workflow], list[Job[Any]]]:
    """Start the workflows and ``depends_on`` jobs of the scan; each will end by itself
    (the timeout's input runs once the sweep has cancelled its dependent)."""
    parent = add.delay(1, 2)
    run_worker(QUEUES, burst=True)
    finished = get_job(parent.id)
    assert finished is not None and finished.status == "succeeded"
    dependents = [
        note.using(depends_on=[parent]).delay("after a finished parent"),
        note.using(depends_on=[add.delay(3, 4)], pass_results=True).delay("unfinished"),
    ]
    workflows: list[Workflow] = [
        chain(add.s(1, 2), double.s()).delay(),
        chord([add.s(1, 1), add.s(2, 2).using(queue="emails")], summarize.s())
        .on_complete(note.si("complete"))
        .delay(),
        group(add.s(1, 1), chain(add.s(1, 2), double.s())).delay(),
        chain(explode.s(), double.s()).on_error(note.si("e")).on_complete(note.si("c")).delay(),
        chord([explode.s(), add.s(1, 2)], collect.s().using(on_dependency_failure="run"))
        .on_error(note.si("e"))
        .delay(),
    ]
    cancelled = chain(add.s(1, 2), double.s(), double.s()).delay()
    cancelled.cancel()
    workflows.append(cancelled)
    # The input of a timed-out node: on a paused queue until the sweep has cancelled it.
    transitions.pause(redis_client(), keys("low"))
    workflows.append(
        chain(add.s(1, 2).using(queue="low"), double.s()).using(dependency_timeout=1).delay()
    )
    flaky = fail_then_succeed.s(ledger, "flaky", 1).using(max_attempts=1)
    workflows.append(chain(flaky, double.s()).delay())
    # A creation whose creator stalled before its commit: rolled back by the sweep.
    plan = graph.compile(chain(add.s(5, 5), double.s()))
    creation = Creation(plan)
    creation.open()
    creation.write_nodes()
    redis_client().zadd(keys(plan.home).opening, {plan.id: 0})
    assert sweep_opening(plan.home) == 1
    return workflows, dependents


def start_killed_creations(ledger: str) -> tuple[str, str]:
    """A workflow whose creator was SIGKILLed after its commit (rolled forward by the
    pollers), and a ``depends_on`` job whose creator was killed before opening its gate
    (deleted by the pollers' sweep): ``(the workflow's id, the job's id)``."""
    # The creator's queues keep results as briefly as this process's.
    options = {q: {"result_ttl": 1, "failed_ttl": 1} for q in QUEUES}
    env = {"RQUEUE_TEST_QUEUE_OPTIONS": json.dumps(options)}
    forward = run_creator("workflow", "commit", ledger, env=env)["workflow"]
    parent = add.delay(2, 2)
    gated = run_creator("depends_on", "link", ledger, env=env, parent=parent.id)["job"]
    return forward, gated


def redis_client() -> redis.Redis:
    return get_client()


@pytest.fixture
def ends() -> Iterator[dict[str, WorkflowState]]:
    """Workflow id -> the state ``workflow_finished`` announced (records expire fast here)."""
    seen: dict[str, WorkflowState] = {}

    def receiver(sender: object, workflow: Workflow, state: WorkflowState, **kwargs: Any) -> None:
        seen[workflow.id] = state

    signals.workflow_finished.connect(receiver, weak=False)
    try:
        yield seen
    finally:
        signals.workflow_finished.disconnect(receiver)


def test_no_key_of_any_workflow_is_left_after_its_ttls(
    rqueue_redis: redis.Redis, dep_path: DepPath, ledger: str, ends: dict[str, WorkflowState]
) -> None:
    poller = Poller(list(QUEUES))
    workflows, dependents = start_every_shape(ledger)
    forward, gated = start_killed_creations(ledger)
    # Someone waits for the chord (Job.wait on its finisher: a done:<id> list).
    waited: list[object] = []

    def wait_for_it() -> None:
        try:
            waited.append(workflows[1].wait(20))
        except Exception as exc:  # its record may expire before the wait reads it
            waited.append(exc)

    waiter = threading.Thread(target=wait_for_it, daemon=True)
    waiter.start()
    timed_out, flaky = workflows[-2], workflows[-1]

    # Retried as soon as it failed (its records last a second).
    run_until(poller, lambda: flaky.id in ends, "the flaky workflow did not fail")
    assert ends.pop(flaky.id) is WorkflowState.FAILED
    flaky.retry_failed()

    def timed_out_node() -> bool:
        found = get_job(timed_out.node_ids[1])
        return found is not None and found.status == "cancelled"

    run_until(poller, timed_out_node, "the dependency timeout did not end the waiting node")
    transitions.resume(rqueue_redis, keys("low"))
    parents_ended: set[str] = set()

    def everything_ended() -> bool:
        for j in dependents:
            found = get_job(j.id)
            if found is None or found.status in ("succeeded", "failed", "cancelled"):
                parents_ended.add(j.id)
        return (
            len(ends) == len(workflows) + 1
            and len(parents_ended) == len(dependents)
            and get_job(gated) is None
        )

    run_until(poller, everything_ended, f"not every workflow ended: {ends}")
    states = [ends[w.id] for w in workflows]
    print("ends:", states)
    assert states[:3] == [WorkflowState.SUCCEEDED] * 3
    assert states[3:5] == [WorkflowState.FAILED] * 2
    assert states[5] is WorkflowState.CANCELLED
    assert states[6] is WorkflowState.FAILED  # a node timed out
    assert states[7] is WorkflowState.SUCCEEDED  # after retry_failed()
    assert ends[forward] is WorkflowState.SUCCEEDED  # rolled forward

    waiter.join(20)
    assert waited, "the wait for the chord did not return"
    print("the wait returned:", waited)
    before = leftovers(rqueue_redis)
    assert any("job:" in key for key in before), before  # the scan sees them while they live
    try:
        run_until(poller, lambda: not leftovers(rqueue_redis), "keys left", timeout=20)
    except AssertionError:
        pass  # named below
    assert leftovers(rqueue_redis) == []
    print("keys left:", sorted(text(k) for k in rqueue_redis.scan_iter(count=1000)))
