"""Model check of the dependency transitions: seeded random graphs, random end orders and
outcomes, random re-deliveries of old outbox entries, checked against a reference model.

Each graph is a random DAG of 1..12 nodes (``wf_nodes.lua``, live sources, each node's
policy "cancel" or "run"; every edge inline, every edge through the outbox, or each at
random). The test reserves whatever is queued and ends a random running job at random:
ack, final failure, or a stop (``cancel`` then ``cancel_running``); between steps it
relays the outbox, or not, and applies old outbox entries again. The model: a node whose
inputs have all ended is cancelled ``dependency_failed`` when one did not succeed under
"cancel", else released (and later ended by the test). Checked: every node ends as the
model says, each runs at most once, each released node holds exactly its inputs'
outcomes, the counters ``released`` and ``depcancelled`` match, and nothing is left
waiting, in the outbox or in ``next:``.
About 2 000 graphs (3 path mixes x 10 chunks x 67 seeds); a failure names its seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest
import redis

from django_rqueue.dependencies import EdgePath
from django_rqueue.engine.fields import JobFields
from django_rqueue.engine.keys import QueueKeys, new_job_id
from tests.support import transitions
from tests.support.dependencies import (
    add_nodes,
    apply,
    arrivals,
    check_waiting,
    edge,
    node,
    outbox,
    relay,
)
from tests.support.engine import PREFIX, QUEUE, Engine

SEEDS_PER_TEST = 67
CHUNKS = 10


@dataclass
class Graph:
    ids: list[str]
    #: inputs[j]: the indices of node j's inputs, in input order (k = position + 1).
    inputs: list[list[int]]
    run: list[bool]
    #: What the test ended each node with ('s', 'f', 'c'), when it ran.
    ended: dict[int, str] = field(default_factory=dict)


def build(engine: Engine, rng: random.Random, paths: str) -> Graph:
    n = rng.randint(1, 12)
    ids = [new_job_id(engine.queue) for _ in range(n)]
    inputs: list[list[int]] = [
        sorted(rng.sample(range(j), rng.randint(0, min(j, 3)))) for j in range(n)
    ]
    run = [rng.random() < 0.4 for _ in range(n)]
    nodes = []
    for i in range(n):
        entries = []
        for j in range(n):
            if i in inputs[j]:
                path: EdgePath = "i" if rng.choice(paths) == "i" else "o"
                entries.append(edge(ids[j], inputs[j].index(i) + 1, path))
        nodes.append(
            node(
                engine,
                job_id=ids[i],
                inputs=[ids[k] for k in inputs[i]],
                nx=" ".join(entries),
                run=run[i],
                name=f"n{i}",
                extra={JobFields.MAX_ATTEMPTS: 1},
            )
        )
    rng.shuffle(nodes)  # creation order does not matter
    assert add_nodes(engine, nodes) == []
    return Graph(ids, inputs, run)


def play(engine: Engine, graph: Graph, rng: random.Random) -> list[str]:
    """End the graph's jobs at random until nothing is left to do; the ids reserved."""
    reserved: list[str] = []
    running: list[str] = []
    history: list[tuple[str, int, str]] = []
    index = {job_id: i for i, job_id in enumerate(graph.ids)}
    for _ in range(1_000):
        while (got := engine.reserve()) is not None:
            reserved.append(got[0])
            running.append(got[0])
        history += [e for e in outbox(engine) if e not in history]
        if rng.random() < 0.3 and history:  # old entries delivered again
            apply(engine, rng.sample(history, rng.randint(1, len(history))))
        if rng.random() < 0.5 or not running:
            relay(engine)
        if not running:
            if not outbox(engine) and engine.stats().get("queued", 0) == 0:
                return reserved
            continue
        job_id = running.pop(rng.randrange(len(running)))
        token = engine.token(job_id)
        kind = rng.choice("ssf c")  # mostly successes
        kind = "c" if kind == " " else kind
        graph.ended[index[job_id]] = kind
        if kind == "s":
            transitions.ack(engine.client, engine.keys, job_id, token, str(index[job_id]), 600)
        elif kind == "f":
            assert engine.fail(job_id, token=token)[0] == "failed"
        else:
            engine.cancel(job_id)
            transitions.cancel_running(engine.client, engine.keys, job_id, token, ttl=600)
    raise AssertionError("the graph did not settle in 1000 steps")


def check(engine: Engine, graph: Graph, reserved: list[str]) -> None:
    assert len(reserved) == len(set(reserved)), "a node ran twice"
    outcome: dict[int, str] = {}
    released = cancelled = 0
    for j, parents in enumerate(graph.inputs):
        job = engine.job(graph.ids[j])
        if parents and not graph.run[j] and any(outcome[i] != "s" for i in parents):
            assert (job["s"], job.get(JobFields.CANCEL_REASON)) == (
                "cancelled",
                "dependency_failed",
            )
            assert j not in graph.ended
            outcome[j] = "c"
            cancelled += 1
        else:
            assert j in graph.ended, f"node {j} never ran"
            outcome[j] = graph.ended[j]
            released += bool(parents)
            state = {"s": "succeeded", "f": "failed", "c": "cancelled"}[outcome[j]]
            assert job["s"] == state
        if parents:
            got = arrivals(engine, graph.ids[j])
            assert sorted(got) == list(range(1, len(parents) + 1))
            assert [got[k + 1].kind for k in range(len(parents))] == [outcome[i] for i in parents]
            for k, i in enumerate(parents):
                if outcome[i] == "s":
                    assert got[k + 1].body == str(i)
    stats = engine.stats()
    assert stats.get("released", 0) == released
    assert stats.get("depcancelled", 0) == cancelled
    assert engine.zset(engine.keys.waiting) == {}
    assert outbox(engine) == []
    assert not list(engine.client.scan_iter(match=engine.keys.next("*")))
    engine.check_invariants()
    check_waiting(engine)


@pytest.mark.parametrize("paths", ["i", "o", "io"], ids=["inline", "outbox", "mixed"])
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_random_graphs_release_each_node_once_as_the_model_says(
    rqueue_redis: redis.Redis, chunk: int, paths: str
):
    engine = Engine(rqueue_redis, QueueKeys.of(PREFIX, QUEUE))
    for seed in range(chunk * SEEDS_PER_TEST, (chunk + 1) * SEEDS_PER_TEST):
        rqueue_redis.flushdb()
        rng = random.Random(seed)
        graph = build(engine, rng, paths)
        reserved = play(engine, graph, rng)
        try:
            check(engine, graph, reserved)
        except AssertionError as exc:
            raise AssertionError(f"seed {seed} (paths {paths}): {exc}") from exc
