"""django-rqueue alone: cost of one enqueue + reserve + ack with a small backlog, a huge one
and many groups (DESIGN §3: each must stay O(1)/O(log n)).

In-process, on the bench's own queues: ``scale1k`` (small backlog), ``scale1m``
(big backlog) and ``groups`` (many groups with queued jobs). Each cycle
enqueues one job with ``.delay()`` (into a rotating group on ``groups``),
reserves the next (the oldest: the backlog stays the same size) and acks it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import redis


def measure(client: redis.Redis, params: Any, log: Callable[[str], None]) -> dict[str, Any]:
    from bench.jobs import noop
    from django_rqueue.conf import get_config
    from django_rqueue.engine import commands, run
    from django_rqueue.engine.calls import new_request_id
    from django_rqueue.engine.connection import get_client
    from django_rqueue.engine.keys import QueueKeys

    client.flushall()
    prefix = get_config().key_prefix
    chunk = 10_000

    def fill(queue: str, n: int) -> None:
        bound = noop.using(queue=queue)
        for start in range(0, n, chunk):
            bound.delay_many([((0.0, 0.0, ""), {})] * min(chunk, n - start))

    t = time.perf_counter()
    fill("scale1k", params.scale_small)
    before = int(client.info("memory")["used_memory"])
    t = time.perf_counter()
    fill("scale1m", params.scale_big)
    big_fill = time.perf_counter() - t
    big_bytes = (int(client.info("memory")["used_memory"]) - before) / params.scale_big
    per_group = max(1, params.scale_small // 200)
    for g in range(params.scale_groups):
        noop.using(queue="groups", group=f"g{g}").delay_many([((0.0, 0.0, ""), {})] * per_group)
    log(
        f"  backlogs: {params.scale_small:,} / {params.scale_big:,} jobs "
        f"(bulk {params.scale_big / big_fill:,.0f} jobs/s, {big_bytes:.0f} B/job) / "
        f"{params.scale_groups:,} groups x {per_group}"
    )

    def cycle_cost(queue: str, grouped: bool) -> float:
        keys = QueueKeys.of(prefix, queue)
        rclient = get_client(queue)
        plain = noop.using(queue=queue)
        n, groups = params.scale_ops, params.scale_groups
        bound = [noop.using(queue=queue, group=f"g{g}") for g in range(min(n, groups))]
        t = time.perf_counter()
        for i in range(n):
            (bound[i % len(bound)] if grouped else plain).delay(0.0, 0.0, "")
            reserve = commands.reserve(
                keys, lease_ms=30_000, worker_id="bench", count=1, request_id=new_request_id()
            )
            got = run.execute(rclient, reserve).jobs
            assert got  # the backlog never runs dry
            job_id, fields = got[0]
            run.execute(rclient, commands.ack(keys, job_id, int(fields[b"token"]), "null", 60))
        return (time.perf_counter() - t) / n * 1e6

    cases = {"1k": ("scale1k", False), "1M": ("scale1m", False), "10k groups": ("groups", True)}
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(max(3, params.runs)):
        for name, (queue, grouped) in cases.items():
            samples[name].append(cycle_cost(queue, grouped))
    client.flushall()
    return {
        "backlog": {
            "1k": params.scale_small,
            "1M": params.scale_big,
            "10k groups": params.scale_groups,
        },
        "us_per_cycle": samples,
        "bulk_fill_jobs_per_s": params.scale_big / big_fill,
        "bytes_per_job_big": big_bytes,
    }


def table(scale: dict[str, Any]) -> str:
    samples = scale["us_per_cycle"]
    base = statistics.median(samples["1k"])
    backlog = scale["backlog"]
    lines = [
        "| django-rqueue: enqueue + reserve + ack | backlog | µs per cycle | vs small backlog |",
        "| --- | --- | --- | --- |",
    ]
    labels = {"1k": "jobs", "1M": "jobs", "10k groups": "groups"}
    for name, values in samples.items():
        med = statistics.median(values)
        lines.append(
            f"| {name} | {backlog[name]:,} {labels[name]} | {med:,.0f} "
            f"({min(values):,.0f}–{max(values):,.0f}) | {med / base:.2f}× |"
        )
    return "\n".join(lines)
