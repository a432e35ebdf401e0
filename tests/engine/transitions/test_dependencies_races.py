"""Two last inputs of a join ending at the same instant: the join is released exactly once.

Thousands of trials per path: a chord of two (two live sources, one waiting dependent),
both sources reserved; two threads, each with its own connection, end one source each
behind a barrier. On the inline path the two acks race in the dependent's queue (with
``ack.lua``, and with ``ack_reserve.lua``, which may hand the released dependent out in
the same script); on the outbox path the acks write entries and two relays' ``dep_apply``
calls race. Per trial: ``released`` + 1, the dependent queued (or handed out) once, with
both arrivals.
"""

from __future__ import annotations

from typing import Literal

import pytest
import redis

from django_rqueue.dependencies import EdgePath
from django_rqueue.engine import commands, dependency_commands
from django_rqueue.engine.fields import JobFields, StatsFields
from django_rqueue.engine.keys import QueueKeys, new_job_id
from django_rqueue.engine.run import execute
from tests.support.dependencies import add_nodes, edge, node, outbox
from tests.support.engine import PREFIX, QUEUE, Engine
from tests.support.races import Racer
from tests.support.redis_server import RedisServer
from tests.support.transitions import ack_and_reserve, reserve_many

#: Trials per test, in batches (one wf_nodes call and one reservation per batch).
TRIALS = 5000
BATCH = 500

type Ending = Literal["ack", "ack_reserve"]


def chords(engine: Engine, path: EdgePath, count: int) -> list[tuple[str, str, str]]:
    """``count`` chords of two: ``(source a, source b, dependent)``, the sources reserved."""
    trios = [(new_job_id(QUEUE), new_job_id(QUEUE), new_job_id(QUEUE)) for _ in range(count)]
    nodes = []
    for a, b, d in trios:
        nodes += [
            node(engine, job_id=a, nx=edge(d, 1, path)),
            node(engine, job_id=b, nx=edge(d, 2, path)),
            node(engine, job_id=d, inputs=[a, b], shape="L"),
        ]
    assert add_nodes(engine, nodes) == []
    reserved = reserve_many(
        engine.client, engine.keys, lease_ms=600_000, worker_id="w", count=2 * count
    )
    assert [j for j, _f in reserved.jobs] == [s for a, b, _d in trios for s in (a, b)]
    return trios


def released(engine: Engine) -> int:
    return int(engine.client.hget(engine.keys.stats, StatsFields.RELEASED) or 0)


@pytest.mark.parametrize(
    ("path", "ending"),
    [("i", "ack"), ("i", "ack_reserve"), ("o", "ack")],
    ids=["inline-ack", "inline-ack_reserve", "outbox-relay"],
)
def test_two_last_inputs_ending_together_release_their_dependent_once(
    redis_server: RedisServer, rqueue_redis: redis.Redis, path: EdgePath, ending: Ending
) -> None:
    engine = Engine(rqueue_redis, QueueKeys.of(PREFIX, QUEUE))
    clients = [redis_server.client(), redis_server.client()]
    keys = engine.keys
    handed: list[str] = []  # dependents handed out by an ack_reserve (at most once each)
    wins = [0, 0]  # trials whose own dependent the side's ack_reserve handed out

    def end(side: int, trio: tuple[str, str, str]) -> None:
        source, d = trio[side], trio[2]
        client = clients[side]
        token = tokens[source]
        if path == "o":  # the entries were written: the race is between two relays
            execute(client, dependency_commands.dep_apply(keys, [(d, side + 1, entries[source])]))
        elif ending == "ack_reserve":
            stale, got = ack_and_reserve(
                client,
                keys,
                source,
                token,
                f'"{source}"',
                600,
                lease_ms=600_000,
                worker_id=f"w{side}",
            )
            assert stale is None
            handed.extend(j for j, _f in got.jobs)
            wins[side] += d in (j for j, _f in got.jobs)
        else:
            execute(client, commands.ack(keys, source, token, f'"{source}"', 600))

    total = handed_out = 0
    for start in range(0, TRIALS, BATCH):
        trios = chords(engine, path, BATCH)
        tokens = {s: int(engine.job(s)["token"]) for a, b, _d in trios for s in (a, b)}
        entries: dict[str, str] = {}
        if path == "o":
            for a, b, _d in trios:
                for s in (a, b):
                    engine.ack(s, tokens[s], f'"{start}"')
            by_input = {(d, k): v for d, k, v in outbox(engine)}
            rqueue_redis.delete(keys.outbox)  # what the racing relays apply
            entries = {s: by_input[d, k] for a, b, d in trios for k, s in ((1, a), (2, b))}
        before = released(engine)
        Racer(lambda trio: end(0, trio), lambda trio: end(1, trio)).race(trios)
        total += len(trios)

        assert released(engine) - before == len(trios)
        dependents = [d for _a, _b, d in trios]
        pipe = rqueue_redis.pipeline(transaction=False)
        for d in dependents:
            pipe.hmget(keys.job(d), JobFields.STATE, JobFields.INPUTS_MISSING, "i:1", "i:2")
        queued = engine.lrange(keys.group(0, ""))
        for d, (state, missing, one, two) in zip(dependents, pipe.execute(), strict=True):
            assert missing == b"0" and one is not None and two is not None, d
            if d in handed:
                assert state == b"running" and d not in queued, d
            else:
                assert state == b"queued", (d, state)
        assert sorted(queued) == sorted(set(dependents) - set(handed))
        assert len(handed) == len(set(handed))
        assert rqueue_redis.zcard(keys.waiting) == 0
        # This batch's dependents leave the queue before the next batch's sources come.
        left = reserve_many(rqueue_redis, keys, lease_ms=600_000, worker_id="w", count=BATCH)
        assert sorted(j for j, _f in left.jobs) == sorted(queued)
        handed_out += len(handed)
        handed.clear()
    assert total == TRIALS
    print(f"{handed_out} of {TRIALS} dependents handed out by an ack; by side: {wins}")
    if ending == "ack_reserve":  # both threads were last some of the time: a real race
        assert handed_out == TRIALS and min(wins) > 0, wins
