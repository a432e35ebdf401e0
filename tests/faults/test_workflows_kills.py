"""A worker killed or frozen while the last input of a chord ends: the body is released once,
with the value of the run whose ack Redis accepted, and nothing is lost.

The last member (:func:`~tests.jobs_app.workflow_jobs.wf_stuck_after_end`) has done its
work and written ``end`` but not reported it when the fault strikes, after every other
member has been acked: its outcome is the body's last input. Each member returns its tag
and the token of its run, so the list the body received names the run that counted.
Every test runs on both paths (``dep_path``): the body released in the last ack's own
script, or by a poller's relay of the outbox entry that ack wrote.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from django_rqueue.workflows import chord
from tests.jobs_app.workflow_jobs import (
    run_value,
    tag_of,
    wf_collect,
    wf_gate_first,
    wf_stuck_after_end,
    wf_value,
)
from tests.workflows.conftest import dep_path  # noqa: F401 (a fixture: both paths)

from .harness import Faults, alive, kill_tree, wait_until

#: Seconds: short, so that a lease runs out within the test.
LEASE = 1.0
#: Members of the chords of the kill tests (the last one is the victim).
MEMBERS = 20


def chord_with_a_stuck_last_member(faults: Faults) -> tuple[str, list[str]]:
    """Create the chord of :data:`MEMBERS` members and wait until every member but the last
    was acked and the last one wrote ``end``; its id and the member tags, in order."""
    tags = [f"m{i}" for i in range(MEMBERS)]
    members = [wf_value.si(faults.ledger, tag) for tag in tags[:-1]]
    members.append(wf_stuck_after_end.si(faults.ledger, tags[-1]))
    wf = chord(members, wf_collect.s(faults.ledger, "body")).delay()
    faults.wait_event("end", tag=tags[-1], timeout=20)
    wait_until(
        lambda: {e["tag"] for e in faults.events("acked")} >= set(tags[:-1]),
        timeout=20,
        message="the other members were not all acked",
    )
    body = wf.node_ids[-1]
    assert faults.state(body) == "waiting"
    return wf.id, tags


@pytest.mark.usefixtures("dep_path")
def test_a_child_killed_as_the_last_input_ends_releases_the_body_once_after_the_retry(
    faults: Faults,
) -> None:
    worker = faults.worker("--queues", "default", "--concurrency", "4", lease=LEASE, grace=1)
    faults.wait_ready(worker)
    wf_id, tags = chord_with_a_stuck_last_member(faults)
    first = faults.events("end", tag=tags[-1])[0]

    os.kill(first["pid"], signal.SIGKILL)  # the child, between its work and its ack

    faults.wait_workflows([wf_id], timeout=20)
    report = faults.check_workflows([wf_id])
    victim, body = report.node_ids(wf_id)[-2:]
    assert report.nodes.starts[victim] == 2 and report.nodes.starts[body] == 1
    second = faults.events("start", job_id=victim)[1]
    assert second["attempt"] == 2 and second["token"] > first["token"]
    assert "worker process died (signal 9, SIGKILL)" in report.nodes.errors(victim)[0]["message"]
    assert faults.events("retrying", job_id=victim)[0]["pid"] == worker.pid  # the master's
    [received] = report.received[body]  # one run, given every value in member order
    assert [tag_of(v) for v in received] == tags
    assert received[-1] == run_value(tags[-1], second["token"])  # the second run's value
    assert worker.alive()


@pytest.mark.usefixtures("dep_path")
def test_a_master_killed_as_the_last_input_ends_leaves_it_to_another_worker_once(
    faults: Faults,
) -> None:
    worker = faults.worker("--queues", "default", "--concurrency", "4", lease=LEASE, grace=1)
    faults.wait_ready(worker)
    wf_id, tags = chord_with_a_stuck_last_member(faults)
    first = faults.events("end", tag=tags[-1])[0]

    kill_tree(worker.pid, signal.SIGKILL)  # master, children and poller at once
    wait_until(lambda: not alive(first["pid"]), timeout=5, message="the child lives on")
    survivor = faults.worker("--queues", "default", "--concurrency", "2", lease=LEASE, grace=1)

    faults.wait_workflows([wf_id], timeout=30)
    report = faults.check_workflows([wf_id])
    victim, body = report.node_ids(wf_id)[-2:]
    assert report.nodes.starts[victim] == 2 and report.nodes.starts[body] == 1
    second = faults.events("start", job_id=victim)[1]
    assert second["pid"] in survivor.children() and second["token"] > first["token"]
    assert "lease expired" in report.nodes.errors(victim)[0]["message"]
    [received] = report.received[body]  # one run, given every value in member order
    assert [tag_of(v) for v in received] == tags
    assert received[-1] == run_value(tags[-1], second["token"])  # the second run's value
    assert survivor.alive()


@pytest.mark.usefixtures("dep_path")
def test_a_last_input_whose_lease_ran_out_has_its_late_ack_refused_and_no_second_release(
    faults: Faults, tmp_path: Path
) -> None:
    """Worker A is frozen (SIGSTOP, its whole tree) while it runs the last member; B reclaims
    it, runs and acks it, the body runs; then A's run goes on and acks: stale, refused."""
    gate = tmp_path / "gate"
    a = faults.worker("--queues", "default", "--concurrency", "2", lease=LEASE, grace=1)
    faults.wait_ready(a)
    members = [wf_value.si(faults.ledger, "m0"), wf_value.si(faults.ledger, "m1")]
    members.append(wf_gate_first.si(faults.ledger, "last", str(gate)))
    wf = chord(members, wf_collect.s(faults.ledger, "body")).delay()
    first = faults.wait_event("start", tag="last", timeout=20)
    wait_until(
        lambda: {e["tag"] for e in faults.events("acked")} >= {"m0", "m1"},
        timeout=20,
        message="the other members were not acked",
    )

    kill_tree(a.pid, signal.SIGSTOP)
    try:
        b = faults.worker("--queues", "default", "--concurrency", "1", lease=LEASE, grace=1)
        faults.wait_workflows([wf.id], timeout=30)  # B reclaimed, ran and acked it; body ran
        gate.touch()
        os.kill(first["pid"], signal.SIGCONT)  # A's run only: its master cannot stop it
        ended = faults.wait_event("end", job_id=first["id"], count=2, timeout=10)
        assert ended["token"] == first["token"]  # A's run, under its old token
        wait_until(
            lambda: "discarding this run" in a.stderr(),
            timeout=10,
            message="A's late ack was not refused",
        )
    finally:
        kill_tree(a.pid, signal.SIGCONT)

    report = faults.check_workflows([wf.id])
    last, body = report.node_ids(wf.id)[-2:]
    second = faults.events("start", job_id=last)[1]
    assert second["pid"] in b.children() and second["token"] > first["token"]
    assert [e["token"] for e in faults.events("acked", job_id=last)] == [second["token"]]
    assert report.nodes.starts[body] == 1
    [received] = report.received[body]
    assert [tag_of(v) for v in received] == ["m0", "m1", "last"]
    assert received[-1] == run_value("last", second["token"])  # B's value, not A's
    wait_until(lambda: a.alive() and b.alive(), timeout=5, message="a worker died")
