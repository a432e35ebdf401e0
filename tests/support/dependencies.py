"""Helpers of the dependency transition tests: waiting nodes and edges built with the raw
scripts (no canvas), their arrivals read back, and the commands a script runs counted.

Nodes are written with ``wf_nodes.lua`` (:func:`add_nodes`), arrivals applied with
``dep_apply.lua`` (:func:`apply`); an edge entry is made with
:class:`django_rqueue.dependencies.Edge`, so the tests and the scripts share one wire format.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import redis

from django_rqueue import dependencies
from django_rqueue.dependencies import Arrival, Dependents, Edge, EdgeCopy, EdgePath
from django_rqueue.engine import dependency_commands
from django_rqueue.engine.dependency_calls import Node, NodesMode
from django_rqueue.engine.dependency_replies import Applied
from django_rqueue.engine.fields import JobFields
from django_rqueue.engine.keys import QueueKeys, new_job_id
from django_rqueue.engine.run import execute
from django_rqueue.inputs import inputs_of
from tests.support import transitions
from tests.support.engine import Engine
from tests.support.redis_commands import command_calls

#: Commands a test's client sends around the one it measures (not run by the script).
_NOT_THE_SCRIPTS = {"evalsha", "config|resetstat", "info", "script|load", "script|exists"}


def script_commands(engine: Engine, action: Callable[[], object]) -> dict[str, int]:
    """The commands Redis ran while ``action`` called one script (``INFO commandstats`` counts
    a script's commands too), by name, on the server that holds the queue."""
    server = engine.server()
    server.config_resetstat()
    action()
    calls = command_calls(server)
    return {name: n for name, n in calls.items() if name not in _NOT_THE_SCRIPTS}


def edge(dependent: str, k: int, path: EdgePath, copy: EdgeCopy = "p") -> str:
    """The edge entry delivering to input ``k`` of ``dependent``."""
    return Edge(copy, path, k, dependent).encode()


def dependents(*entries: str) -> str:
    """An ``nx`` field of ``entries`` (edge entries, or the ``+`` / ``w`` tokens)."""
    return " ".join(entries)


def node(
    engine: Engine,
    *,
    job_id: str | None = None,
    inputs: Sequence[str] = (),
    nx: str = "",
    run: bool = False,
    shape: str | None = None,
    source: bool | None = None,
    name: str = "tests.noop",
    ttl: int = 600,
    priority: int = 0,
    group: str = "",
    delay_ms: int = 0,
    run_at_ms: int = -1,
    extra: Mapping[str, str | int] | None = None,
) -> Node:
    """A node of :func:`add_nodes`: ``inputs`` its input ids (``dn`` = their number), ``nx``
    its dependents, ``run`` the ``"run"`` policy, ``source`` (default: no inputs) marks it
    a source of a gated creation."""
    fields: dict[str, str | int] = {
        JobFields.NAME: name,
        JobFields.PAYLOAD: '{"a":[],"k":{}}',
        JobFields.RESULT_TTL: ttl,
    }
    if inputs:
        fields[JobFields.INPUT_COUNT] = len(inputs)
        fields[JobFields.INPUT_IDS] = " ".join(inputs)
    if nx:
        fields[JobFields.DEPENDENTS] = nx
    if run:
        fields[JobFields.ON_DEPENDENCY_FAILURE] = "r"
    if shape is not None:
        fields[JobFields.PASS_SHAPE] = shape
    fields.update(extra or {})
    return Node(
        job_id or new_job_id(engine.queue),
        priority,
        group,
        delay_ms,
        run_at_ms,
        fields,
        source=not inputs if source is None else source,
    )


def add_nodes(
    engine: Engine,
    nodes: Iterable[Node],
    *,
    mode: NodesMode = "live",
    deadline_ms: int = -1,
    grace_ms: int = -1,
) -> list[tuple[int, str]]:
    """Write ``nodes`` with ``wf_nodes.lua``: the ``(index, outcome)`` of those not created."""
    command = dependency_commands.wf_nodes(
        engine.keys, list(nodes), mode=mode, deadline_ms=deadline_ms, grace_ms=grace_ms
    )
    return execute(engine.client, command)


def apply(engine: Engine, triples: Sequence[tuple[str, int, str]]) -> Applied:
    """``dep_apply.lua`` on the engine's queue: ``(applied, duplicates, released, cancelled)``."""
    return execute(engine.client, dependency_commands.dep_apply(engine.keys, triples))


def arrivals(engine: Engine, job_id: str) -> dict[int, Arrival]:
    """The arrivals a node's hash holds, by input index (the gate is ``0``)."""
    fields = engine.job_like(engine.keys.job(job_id))
    return {
        int(name[2:]): dependencies.decode(value)
        for name, value in fields.items()
        if name.startswith("i:")
    }


def inputs(engine: Engine, job_id: str) -> list[Any]:
    """The values a released node receives (:func:`django_rqueue.inputs.inputs_of`)."""
    return inputs_of(engine.job_like(engine.keys.job(job_id)))


def outbox(engine: Engine) -> list[tuple[str, int, str]]:
    """The queue's outbox entries as ``(dependent id, input index, value)``, oldest first."""
    entries: list[tuple[bytes, dict[bytes, bytes]]] = engine.client.xrange(engine.keys.outbox)  # type: ignore[assignment]
    return [(f[b"d"].decode(), int(f[b"x"]), f[b"v"].decode()) for _id, f in entries]


def relay(engine: Engine, source: QueueKeys | None = None) -> Applied:
    """What a poller's relay does with the queue's outbox (all of it, on one Redis): apply
    every entry with ``dep_apply.lua`` on the dependent's queue, then delete the entries."""
    keys = source or engine.keys
    client: redis.Redis = engine.client
    entries: list[tuple[bytes, dict[bytes, bytes]]] = client.xrange(keys.outbox)  # type: ignore[assignment]
    if not entries:
        return Applied(0, 0, 0, 0)
    triples = [(f[b"d"].decode(), int(f[b"x"]), f[b"v"].decode()) for _id, f in entries]
    got = apply(engine, triples)
    client.xdel(keys.outbox, *[entry_id for entry_id, _f in entries])
    return got


def deliver(engine: Engine, path: EdgePath) -> None:
    """What the pollers do between two steps: on the outbox path, relay every entry, and
    the entries the relay's own cascade wrote (a bounded number of rounds); then the
    outbox is empty."""
    for _ in range(10):
        if path == "i" or not outbox(engine):
            break
        relay(engine)
    assert outbox(engine) == []


def ack(engine: Engine, job_id: str, result: str, ttl: int = 600) -> int:
    """Reserve ``job_id`` (it must be the next job) and ack it with ``result``; its token."""
    assert engine.reserve_id() == job_id
    token = engine.token(job_id)
    transitions.ack(engine.client, engine.keys, job_id, token, result, ttl)
    return token


def fan_in(engine: Engine, path: EdgePath, count: int, **options: Any) -> tuple[list[str], str]:
    """``count`` live sources, each an input of one waiting job (shape ``L``; ``options``:
    :func:`node`'s for it): ``(sources, dependent)``."""
    d = new_job_id(engine.queue)
    sources = [new_job_id(engine.queue) for _ in range(count)]
    nodes = [node(engine, job_id=s, nx=edge(d, k, path)) for k, s in enumerate(sources, start=1)]
    nodes.append(node(engine, job_id=d, inputs=sources, shape="L", **options))
    assert add_nodes(engine, nodes) == []
    return sources, d


def check_waiting(engine: Engine) -> None:
    """Assert the waiting jobs agree with ``waiting``: each member is a job in state
    ``waiting`` with as many inputs missing ('dw') as fields ``i:<k>`` it lacks (the gate
    counted while ``gt`` says it is closed), and every job in state ``waiting`` is a member."""
    members = engine.zset(engine.keys.waiting)
    for raw in engine.client.scan_iter(match=engine.keys.job("*"), count=1000):
        key = raw.decode() if isinstance(raw, bytes) else raw
        fields = engine.job_like(key)
        job_id = key[len(engine.keys.job("")) :]
        if fields.get(JobFields.STATE) != "waiting":
            assert job_id not in members, (job_id, fields.get(JobFields.STATE))
            continue
        assert job_id in members, job_id
        count = int(fields.get(JobFields.INPUT_COUNT, "0"))
        wanted = range(0 if JobFields.GATE in fields else 1, count + 1)
        arrived = [k for k in wanted if not fields.get(f"i:{k}", "r").startswith("r")]
        assert int(fields[JobFields.INPUTS_MISSING]) == len(wanted) - len(arrived), fields


def decoded(value: str) -> Arrival:
    return dependencies.decode(value)


__all__ = [
    "Dependents",
    "ack",
    "add_nodes",
    "apply",
    "arrivals",
    "check_waiting",
    "decoded",
    "deliver",
    "dependents",
    "edge",
    "fan_in",
    "inputs",
    "node",
    "outbox",
    "relay",
    "script_commands",
]
