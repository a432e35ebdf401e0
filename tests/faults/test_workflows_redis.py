"""Redis faults under running workflows: the reply to the last input's ack lost, and Redis
killed (``kill -9``) and restarted from its AOF while workflows of every shape run.

The lost reply: the ack reached Redis and was applied (the body released in that very
script, or its arrival put in the outbox when every edge goes through it), its reply never
came back; the worker sends it again, and the repeated ack is
read as applied: no second arrival, no second ``job_succeeded``, no run discarded.

The restart: random workflows (a seed printed with the test; chains, chords, groups and
their nestings, nodes on three queues, half of them created with every edge through the
outbox, ``RQUEUE["WORKFLOW_FORCE_OUTBOX"]``, which only the creating process reads) run on
two workers while Redis is killed three times at random moments and restarted from its
AOF (``appendfsync always``). Every workflow ends ``succeeded``, its ``on_complete`` run
once, with
:meth:`~tests.faults.harness.Faults.check_workflows`' invariants; re-runs (a lease that ran
out during an outage) are allowed, but every run of a node got its full input list.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
import redis
from pytest_django.fixtures import Settings as SettingsFixture

from django_rqueue.conf import get_config
from django_rqueue.engine.scripts import load
from django_rqueue.workflows import chain, chord, group
from django_rqueue.workflows.canvas import Canvas
from django_rqueue.workflows.signature import Signature
from tests.jobs_app.workflow_jobs import run_value, wf_collect, wf_gate, wf_value
from tests.support.redis_server import RedisServer
from tests.workflows.conftest import dep_path  # noqa: F401 (a fixture: both paths)

from .harness import Faults, WorkerProcess, wait_until
from .proxy import FaultProxy
from .test_lost_replies import ack_calls
from .test_redis_restart import outage_logged

QUEUES = ("default", "emails", "low")


@pytest.mark.slow
@pytest.mark.usefixtures("slowlog", "dep_path")
def test_a_lost_reply_to_the_last_inputs_ack_is_sent_again_and_read_as_applied(
    faults: Faults, proxy: FaultProxy, redis_client: redis.Redis, tmp_path: Path
) -> None:
    # Lease long enough that nothing but the lost reply is in play.
    worker = faults.worker(
        "--queues", "default", "--concurrency", "2", lease=30, redis_url=proxy.url()
    )
    faults.wait_ready(worker)
    for name in ("ack", "ack_reserve"):  # cached: the EVALSHA is applied, not NOSCRIPT
        load(name).ensure_loaded(redis_client)
    gate = tmp_path / "gate"
    last = f"last-{uuid.uuid4().hex}"
    members = [wf_value.si(faults.ledger, "m0"), wf_value.si(faults.ledger, "m1")]
    members.append(wf_gate.si(faults.ledger, last, str(gate)))
    wf = chord(members, wf_collect.s(faults.ledger, "body")).delay()
    last_id, body = wf.node_ids[-2:]
    faults.wait_event("start", tag=last, timeout=20)
    wait_until(
        lambda: {e["tag"] for e in faults.events("acked")} >= {"m0", "m1"},
        timeout=20,
        message="the other members were not acked",
    )

    # Only the last member's result holds "<tag>@": its ack is the request that is cut off.
    proxy.cut_after(f"{last}@".encode())
    gate.touch()
    wait_until(lambda: proxy.cut() == 1, timeout=10, message="the ack was never sent")
    wait_until(
        lambda: faults.state(last_id) == "succeeded", timeout=5, message="the ack was not applied"
    )
    if not get_config().workflow_force_outbox:
        assert faults.state(body) != "waiting"  # released by that same script
    assert faults.events("acked", tag=last) == [], "the worker cannot know its ack was applied"
    proxy.reset_all()  # the reply is lost for good (ECONNRESET)
    proxy.heal()

    faults.wait_workflows([wf.id], timeout=30)
    report = faults.check_workflows([wf.id])
    assert ack_calls(redis_client, last_id) >= 2, "the ack was not sent again"
    assert report.nodes.starts[last_id] == 1 and report.nodes.starts[body] == 1
    expected = [run_value("m0", 1), run_value("m1", 1), run_value(last, 1)]
    assert report.received[body] == [expected]
    assert "discard" not in worker.stderr()  # the repeated ack was not taken for a lost lease
    assert worker.alive()


# -- Redis restarted from its AOF --------------------------------------------------------

#: Workflows of the restart test, and how many times Redis is killed while they run.
WORKFLOWS = 100
KILLS = 3


@pytest.fixture
def aof_faults(tmp_path: Path, settings: SettingsFixture) -> Iterator[tuple[Faults, RedisServer]]:
    """A :class:`Faults` on its own AOF-always Redis (the test process points at it too)."""
    server = RedisServer(["--appendonly", "yes", "--appendfsync", "always"]).start()
    settings.RQUEUE = {**settings.RQUEUE, "REDIS_URL": server.url}
    client = server.client()
    try:
        with Faults.session(tmp_path, client, server.url) as harness:
            yield harness, server
    finally:
        client.close()
        server.close()


class Shapes:
    """Random workflows of ``wf_*`` nodes, each on a random queue, tags unique."""

    def __init__(self, rng: random.Random, ledger: str, gate: str) -> None:
        self.rng, self.ledger, self.gate, self.n = rng, ledger, gate, 0
        self.nodes = 0

    def _tag(self) -> str:
        self.n += 1
        self.nodes += 1
        return f"n{self.n}"

    def _on_a_queue(self, sig: Signature) -> Signature:
        return sig.using(queue=self.rng.choice(QUEUES))

    def source(self) -> Signature:
        """A node without inputs: it waits for the gate file (nothing ends before it)."""
        return self._on_a_queue(wf_gate.si(self.ledger, self._tag(), self.gate))

    def taker(self) -> Signature:
        return self._on_a_queue(wf_collect.s(self.ledger, self._tag()))

    def workflow(self) -> Canvas:
        rng = self.rng
        kind = rng.choice(["chain", "chord", "group", "fan", "groups_of_chains", "chord_chain"])
        if kind == "chain":
            return chain(self.source(), *(self.taker() for _ in range(rng.randint(1, 3))))
        if kind == "chord":
            return chord([self.source() for _ in range(rng.randint(2, 6))], self.taker())
        if kind == "group":
            return group(*(self.source() for _ in range(rng.randint(2, 4))))
        if kind == "fan":  # one source, members taking its value, a body taking theirs
            members = [self.taker() for _ in range(rng.randint(2, 4))]
            return chain(self.source(), chord(members, self.taker()), self.taker())
        if kind == "groups_of_chains":
            return group(*(chain(self.source(), self.taker()) for _ in range(rng.randint(2, 3))))
        return chain(group(*(self.source() for _ in range(rng.randint(2, 4)))), self.taker())


@pytest.mark.slow
def test_redis_killed_and_restarted_from_its_aof_mid_workflow_loses_nothing(
    aof_faults: tuple[Faults, RedisServer], settings: SettingsFixture, tmp_path: Path
) -> None:
    faults, server = aof_faults
    seed = random.randrange(2**32)
    print(f"seed {seed}")
    rng = random.Random(seed)
    gate = tmp_path / "gate"
    shapes = Shapes(rng, faults.ledger, str(gate))
    ids: list[str] = []
    for n in range(WORKFLOWS):
        outbox = n % 2 == 1
        settings.RQUEUE = {**settings.RQUEUE, "WORKFLOW_FORCE_OUTBOX": outbox}
        callback = wf_value.si(faults.ledger, f"done{n}")  # on_complete: enqueued once, runs
        ids.append(shapes.workflow().on_complete(callback).delay().id)
    total = shapes.nodes
    # Nothing ends before both workers are up and every workflow is written (the sources
    # wait for the gate file): the kills fall at chosen points of the run (fractions of the
    # nodes acked), neither during the creation nor during a worker's startup.
    workers = [
        faults.worker("--queues", ",".join(QUEUES), "--concurrency", "2", lease=2, grace=1)
        for _ in range(2)
    ]
    for worker in workers:
        faults.wait_ready(worker)
    gate.touch()

    for at in sorted(rng.uniform(0.1, 0.8) for _ in range(KILLS)):
        wait_until(
            partial(acked_at_least, faults, at * total),
            timeout=30,
            interval=0.005,
            message=f"{at:.0%} of the nodes were never acked",
        )
        seen = [len(w.stderr()) for w in workers]
        server.kill9()
        done = sum(1 for e in faults.events("acked") if e["tag"].startswith("n"))
        print(f"Redis killed with {done}/{total} nodes acked")
        assert done < total, "every node finished before the kill"
        wait_until(
            partial(outage_noticed, workers, seen),
            timeout=15,
            interval=0.05,
            message="no worker noticed that Redis is down",
        )
        server.restart()

    faults.wait_workflows(ids, timeout=60)
    report = faults.check_workflows(ids)
    print(f"{len(ids)} workflows, {total} nodes; re-run nodes: {len(report.nodes.duplicates)}")
    assert len(report.callbacks) == WORKFLOWS
    assert all(worker.alive() for worker in workers)


def acked_at_least(faults: Faults, count: float) -> bool:
    """The ledger has ``count`` accepted acks of nodes (tags ``n<i>``; not callbacks)."""
    return sum(1 for e in faults.events("acked") if e["tag"].startswith("n")) >= count


def outage_noticed(workers: list[WorkerProcess], seen: list[int]) -> bool:
    """A worker logged an outage after the first ``seen[i]`` characters of its stderr."""
    return any(outage_logged(w.stderr()[n:]) for w, n in zip(workers, seen, strict=True))
