"""Workflow.cancel() racing the last input of a chord: the body is released at most once and the
workflow ends ``cancelled``, with ``on_complete`` once and ``on_error`` never.

Thousands of trials per path. A chord of two (``add``, ``add``) into ``summarize``, with
both callbacks; one member acked, the other reserved. Two threads behind a barrier: one
ends the last input, the other calls :func:`~django_rqueue.workflows.control.cancel`.

- inline path: the last input is acked with ``ack.lua``, or with ``ack_reserve.lua``, which
  hands the released body out in the same script; the thread then does what a worker
  would: stops it when the cancel asked it to (``cx``: ``cancel_running.lua``), else acks
  it;
- outbox path: the last input was acked before; the race is between the relay's
  ``dep_apply`` of its entry and the cancel.

Then the batch's finishers run in an in-process worker (with the relay between bursts).
Per trial: the body ended ``cancelled`` from ``waiting`` (never released), from ``queued``
or stopped while running (released once), or ``succeeded`` (released once, done before the
cancel reached it); ``released`` grows by exactly the released bodies plus the finishers;
the workflow is ``cancelled``; ``on_complete`` ran once, ``on_error`` was never created.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis

from django_rqueue.engine import commands, dependency_commands
from django_rqueue.engine.fields import JobFields, StatsFields
from django_rqueue.engine.keys import QueueKeys, finisher_id
from django_rqueue.engine.queue_ref import queue_ref
from django_rqueue.engine.run import execute
from django_rqueue.engine.workflow_calls import Cancelled
from django_rqueue.job import get_job
from django_rqueue.workflows import WorkflowState, chord, control, get_workflow
from tests.conftest import Event
from tests.support import transitions
from tests.support import workflows as wf
from tests.support.races import Racer
from tests.support.redis_server import RedisServer
from tests.support.relay import run_until_settled
from tests.workflows.conftest import DepPath
from tests.workflows.jobs import add, note, summarize

pytestmark = pytest.mark.usefixtures("worker_may_close_db_connections")

TRIALS = 2000
BATCH = 250
LEASE_MS = 600_000
REASON = "workflow_cancelled"


def released() -> int:
    ref = queue_ref("default")
    return int(ref.client().hget(ref.keys.stats, StatsFields.RELEASED) or 0)


def callback_id(workflow_id: str, which: str) -> str:
    return f"default:{workflow_id.partition(':')[2]}.{which}0"


def relay_holding_back(dependents: set[str], k: int) -> dict[str, str]:
    """Relay the default queue's outbox but the entries for input ``k`` of ``dependents``:
    those are deleted and returned (dependent -> arrival value) for a racing relay."""
    ref = queue_ref("default")
    client: redis.Redis = ref.client()
    held: dict[str, str] = {}
    entries: list[Any] = client.xrange(ref.keys.outbox)  # type: ignore[assignment]
    for entry_id, f in entries:
        d, x, v = f[b"d"].decode(), int(f[b"x"]), f[b"v"].decode()
        if d in dependents and x == k:
            held[d] = v
        else:
            execute(client, dependency_commands.dep_apply(ref.keys, [(d, x, v)]))
        client.xdel(ref.keys.outbox, entry_id)
    return held


@dataclass
class Trial:
    """One chord of the race: its workflow, its last input (reserved) and body, and how the
    acking side goes (``delay`` round trips first; ``reserving``: with ``ack_reserve``)."""

    workflow_id: str
    last: str
    body: str
    token: int
    delay: int
    reserving: bool
    #: Outbox path: the last input's arrival at the body, for the racing relay.
    entry: str = ""


@dataclass
class Sides:
    """The two racing sides (and what runs between two trials), on the acking side's own
    connection; ``held``: the finishers taken out of the queue, for the worker later."""

    client: redis.Redis
    path: DepPath
    keys: QueueKeys = field(default_factory=lambda: queue_ref("default").keys)
    held: list[tuple[str, int]] = field(default_factory=list)

    def end_last(self, trial: Trial) -> None:
        client, keys = self.client, self.keys
        # The cancel reaches the nodes one round trip after it starts (the record first):
        # 0 to 2 round trips of delay here make every order happen.
        for _ in range(trial.delay):
            client.ping()
        if self.path == "outbox":
            apply = dependency_commands.dep_apply(keys, [(trial.body, 2, trial.entry)])
            execute(client, apply)
            return
        if not trial.reserving:  # a plain ack: a released body stays queued for the cancel
            execute(client, commands.ack(keys, trial.last, trial.token, "3", 600))
            return
        stale, got = transitions.ack_and_reserve(
            client, keys, trial.last, trial.token, "3", 600, lease_ms=LEASE_MS, worker_id="a"
        )
        assert stale is None
        for job_id, fields in got.jobs:
            token = int(fields[b"token"])
            if job_id != trial.body:
                self.held.append((job_id, token))  # a finisher: run later by the worker
            elif client.hexists(keys.job(job_id), JobFields.CANCEL_REQUESTED):
                transitions.cancel_running(client, keys, job_id, token, ttl=600)  # stopped
            else:
                execute(client, commands.ack(keys, job_id, token, "5", 600))

    def cancel(self, trial: Trial) -> Cancelled:
        return control.cancel(trial.workflow_id)

    def hold_finishers(self, trial: Trial) -> None:
        """Take the finishers this trial queued out of the queue (the worker runs them
        later), so that the next trial's ack_reserve can hand its own body out."""
        got = transitions.reserve_many(
            self.client, self.keys, lease_ms=LEASE_MS, worker_id="a", count=9
        )
        self.held.extend((job_id, int(f[b"token"])) for job_id, f in got.jobs)


def start_trials(rng: random.Random, path: DepPath) -> list[Trial]:
    """A batch of chords, each with one member acked and the other reserved (outbox path:
    acked too, its arrival at the body held back), everything else relayed."""
    keys = queue_ref("default").keys
    client: redis.Redis = queue_ref("default").client()
    handles = [
        chord([add.s(i, 1), add.s(i, 2)], summarize.s())
        .on_error(note.si("error"))
        .on_complete(note.si("complete"))
        .delay()
        for i in range(BATCH)
    ]
    reserved = transitions.reserve_many(
        client, keys, lease_ms=LEASE_MS, worker_id="w", count=2 * BATCH
    )
    tokens = {j: int(f[b"token"]) for j, f in reserved.jobs}
    assert sorted(tokens) == sorted(i for h in handles for i in h.node_ids[:2])
    for h in handles:
        first = h.node_ids[0]
        execute(client, commands.ack(keys, first, tokens[first], "2", 600))
    entries: dict[str, str] = {}
    if path == "outbox":
        for h in handles:
            last = h.node_ids[1]
            execute(client, commands.ack(keys, last, tokens[last], "3", 600))
        entries = relay_holding_back({h.node_ids[2] for h in handles}, 2)
    wf.relay()
    return [
        Trial(
            h.id,
            h.node_ids[1],
            h.node_ids[2],
            tokens[h.node_ids[1]],
            rng.randrange(3),
            rng.random() < 0.5,
            entries.get(h.node_ids[2], ""),
        )
        for h in handles
    ]


def body_outcome(trial: Trial) -> str:
    """How the body ended: ``waiting`` (cancelled before its release), ``queued``
    (cancelled after it), ``stopped`` (while it ran), ``done`` (it ran to the end)."""
    body = wf.job(trial.body)
    state, reason = body[JobFields.STATE], body.get(JobFields.CANCEL_REASON)
    if state == "succeeded":
        return "done"
    assert (state, reason) == ("cancelled", REASON), body
    missing = int(body[JobFields.INPUTS_MISSING])
    assert missing in (0, 1), body
    if missing:
        return "waiting"
    return "stopped" if JobFields.STARTED_AT in body else "queued"


def test_cancel_racing_the_last_input_releases_the_body_at_most_once(
    redis_server: RedisServer, rqueue_redis: redis.Redis, dep_path: DepPath, events: list[Event]
) -> None:
    totals: Counter[str] = Counter()
    seed = random.randrange(1 << 32)
    print(f"seed {seed}")
    rng = random.Random(seed)
    for _batch in range(TRIALS // BATCH):
        trials = start_trials(rng, dep_path)
        before = released()
        sides = Sides(redis_server.client(), dep_path)
        Racer(sides.end_last, sides.cancel, sides.hold_finishers).race(trials)
        wf.relay()
        for job_id, token in sides.held:  # back to the queue (no attempt spent)
            assert job_id.endswith(".f"), job_id
            transitions.release(rqueue_redis, sides.keys, job_id, token)
        run_until_settled()

        outcomes = [body_outcome(trial) for trial in trials]
        totals.update(outcomes)
        bodies_released = sum(outcome != "waiting" for outcome in outcomes)
        assert released() - before == bodies_released + BATCH  # each body once, each finisher
        ran = Counter(e[2]["job"].id for e in events if e[0] == "job_succeeded")
        for trial in trials:
            found = get_workflow(trial.workflow_id)
            assert found is not None and found.state is WorkflowState.CANCELLED, found
            fid = finisher_id(trial.workflow_id)
            assert wf.state(fid) == "succeeded" and ran[fid] == 1
            assert get_job(callback_id(trial.workflow_id, "e")) is None
            complete = callback_id(trial.workflow_id, "c")
            assert wf.state(complete) == "succeeded" and ran[complete] == 1
        events.clear()
        rqueue_redis.flushdb()
    print(f"{dep_path}: body ended {dict(totals)}")
    assert sum(totals.values()) == TRIALS
    # Every order happened: cancelled before the release, after it, and (inline, where
    # the acking thread may be handed the body) while it ran and after it ended.
    expected = {"waiting", "queued"} | ({"stopped", "done"} if dep_path == "inline" else set())
    assert set(totals) == expected, totals
