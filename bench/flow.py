"""django-rqueue alone: what flow control and periodic entries add to a reserve.

Two measurements, in-process on the bench's own queues, each case interleaved
with the others round after round so all see the same minute of a drifting host:

1. **Reserve cost.** One cycle enqueues a job with ``.delay()``, reserves the
   next one (a worker's reserve, with the queue's options) and acks it, over a
   1 000-job backlog, on

   - ``flow_plain``: no option (the baseline);
   - ``flow_rate``: ``rate_limit`` high enough never to hold a job back, so the
     cycle pays the GCRA check on every reserve;
   - ``flow_groups``: ``group_concurrency`` 1 over 1 000 groups, so every
     reserve counts a running job and every ack frees its slot, beside
     ``flow_groups_open``: the same 1 000 groups without a cap (the fair
     baseline for the cap's own cost);
   - ``flow_sched``: 10 000 periodic entries stored on the queue.

   Reported as µs per cycle (client side) and Redis CPU µs per cycle (``INFO
   commandstats``, all commands of the cycle), each against the plain queue.
   Target: every case within 1.2× of the plain one.

2. **Scheduler round.** ``schedule_due.lua`` (the read a poller's scheduler
   makes every round) over 10 and 10 000 entries with none due, and over 100
   and 10 000 entries with 100 due: the cost follows the due entries, not the
   stored ones (O(log n + due)).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import redis

#: Queue -> what the cycle on it exercises.
QUEUES = {
    "flow_plain": "plain",
    "flow_rate": "rate limit 1 000 000/s (never holds a job back)",
    "flow_groups_open": "1 000 groups, no cap",
    "flow_groups": "1 000 groups, group concurrency 1",
    "flow_sched": "10 000 schedule entries",
}
#: RQUEUE["QUEUES"] entries of the flow queues (bench/settings.py merges them).
QUEUE_OPTIONS: dict[str, dict[str, Any]] = {
    "flow_plain": {},
    "flow_rate": {"rate_limit": "1000000/s"},
    "flow_groups_open": {},
    "flow_groups": {"group_concurrency": 1},
    "flow_sched": {},
}
BACKLOG = 1000
GROUPS = 1000
ENTRIES = 10_000


def reserve_options(queue: str) -> dict[str, Any]:
    """The per-queue keyword arguments a worker passes to ``commands.reserve``."""
    from django_rqueue.conf import get_config

    config = get_config().queue(queue)
    return {"group_concurrency": config.group_concurrency, "rate_limit": config.rate_limit}


def _redis_usec(client: redis.Redis) -> float:
    stats = client.info("commandstats")
    return float(sum(v["usec"] for v in stats.values()))


def _store_entries(client: redis.Redis, queue: str, n: int, due: int) -> None:
    """Store ``n`` periodic entries on ``queue`` (``schedule_sync.lua``), ``due`` of them due."""
    from django_rqueue.conf import get_config
    from django_rqueue.engine import commands, run
    from django_rqueue.engine.keys import QueueKeys

    keys = QueueKeys.of(get_config().key_prefix, queue)
    now = int(time.time() * 1000)
    entries = [
        (f"e{i}", f"every:{60 + i}", now - 60_000 if i < due else now + 3_600_000 + i)
        for i in range(n)
    ]
    run.execute(client, commands.schedule_sync(keys, entries))


def measure(client: redis.Redis, params: Any, log: Callable[[str], None]) -> dict[str, Any]:
    from bench.jobs import noop
    from django_rqueue.conf import get_config
    from django_rqueue.engine import commands, run
    from django_rqueue.engine.calls import new_request_id
    from django_rqueue.engine.connection import get_client
    from django_rqueue.engine.keys import QueueKeys

    client.flushall()
    prefix = get_config().key_prefix
    ops = params.scale_ops
    for queue in QUEUES:
        if queue.startswith("flow_groups"):
            per = max(1, BACKLOG // GROUPS)
            for g in range(GROUPS):
                noop.using(queue=queue, group=f"g{g}").delay_many([((0.0, 0.0, ""), {})] * per)
        else:
            noop.using(queue=queue).delay_many([((0.0, 0.0, ""), {})] * BACKLOG)
    _store_entries(client, "flow_sched", ENTRIES, due=0)
    log(f"  flow queues: {BACKLOG:,} jobs each; {GROUPS:,} groups; {ENTRIES:,} entries")

    def cycle(queue: str) -> tuple[float, float]:
        keys = QueueKeys.of(prefix, queue)
        rclient = get_client(queue)
        grouped = queue.startswith("flow_groups")
        bound = [noop.using(queue=queue, group=f"g{g}") for g in range(GROUPS if grouped else 1)]
        options = reserve_options(queue)
        usec = _redis_usec(client)
        t = time.perf_counter()
        for i in range(ops):
            bound[i % len(bound)].delay(0.0, 0.0, "")
            reserve = commands.reserve(
                keys,
                lease_ms=30_000,
                worker_id="bench",
                count=1,
                request_id=new_request_id(),
                **options,
            )
            got = run.execute(rclient, reserve).jobs
            assert got, f"{queue}: the backlog never runs dry"
            job_id, fields = got[0]
            run.execute(rclient, commands.ack(keys, job_id, int(fields[b"token"]), "null", 60))
        wall = (time.perf_counter() - t) / ops * 1e6
        return wall, (_redis_usec(client) - usec) / ops

    samples: dict[str, dict[str, list[float]]] = {q: {"us": [], "redis_us": []} for q in QUEUES}
    for _ in range(max(3, params.runs)):
        for queue in QUEUES:
            wall, server = cycle(queue)
            samples[queue]["us"].append(wall)
            samples[queue]["redis_us"].append(server)

    rounds: dict[str, list[float]] = {}
    cases = {"10 entries, 0 due": (10, 0), "10 000 entries, 0 due": (ENTRIES, 0)}
    cases |= {"100 entries, 100 due": (100, 100), "10 000 entries, 100 due": (ENTRIES, 100)}
    for name, (n, due) in cases.items():
        queue = f"flow_due_{n}_{due}"
        _store_entries(client, queue, n, due)
        keys = QueueKeys.of(prefix, queue)
        rounds[name] = []
        for _ in range(max(3, params.runs)):
            usec = _redis_usec(client)
            for _ in range(200):
                got = run.execute(client, commands.schedule_due(keys, 500))
                assert len(got.due) == due, (name, len(got.due))
            rounds[name].append((_redis_usec(client) - usec) / 200)
    client.flushall()
    return {"us_per_cycle": samples, "schedule_due_redis_us": rounds, "ops": ops}


def table(flow: dict[str, Any]) -> str:
    samples = flow["us_per_cycle"]
    base = statistics.median(samples["flow_plain"]["us"])
    base_redis = statistics.median(samples["flow_plain"]["redis_us"])
    lines = [
        "| django-rqueue: enqueue + reserve + ack | µs per cycle | vs plain "
        "| Redis CPU µs per cycle | vs plain |",
        "| --- | --- | --- | --- | --- |",
    ]
    for queue, label in QUEUES.items():
        us, red = samples[queue]["us"], samples[queue]["redis_us"]
        lines.append(
            f"| {label} | {statistics.median(us):,.1f} ({min(us):,.1f}–{max(us):,.1f}) "
            f"| {statistics.median(us) / base:.2f}× "
            f"| {statistics.median(red):,.1f} | {statistics.median(red) / base_redis:.2f}× |"
        )
    lines += ["", "| scheduler round: schedule_due.lua | Redis CPU µs per call |", "| --- | --- |"]
    for name, values in flow["schedule_due_redis_us"].items():
        lines.append(
            f"| {name} | {statistics.median(values):,.1f} ({min(values):,.1f}–{max(values):,.1f}) |"
        )
    return "\n".join(lines)
