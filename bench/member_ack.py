"""Redis CPU of a workflow member's ack against a plain job's ack, interleaved.

    python bench/member_ack.py [--rounds 5] [--jobs 3000]

Starts one private redis-server and runs, in turn in one process, ``--rounds`` times: a
batch of ``--jobs`` plain no-op jobs (``delay_many``), and a chord of as many members and
one body, on the inline path and on the outbox path (``WORKFLOW_FORCE_OUTBOX``). Each job
or member is reserved, then every one is acked with the ack script; Redis's ``INFO
commandstats`` (``evalsha`` microseconds) is read around the acks. A member's ack also
records its arrival on the body and on the workflow's finisher (and the last one releases
the body): that is what it costs. Prints the medians in µs per ack and the median of the
per-round ratios (member / plain), with their range. Needs only the repository's venv and
redis-server.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHAPES = ("plain", "member inline", "member outbox", "group member")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=3000)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from tests.support.redis_server import RedisServer

    server = RedisServer().start()
    try:
        os.environ["BENCH_REDIS_URL"] = server.url
        os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
        import django

        django.setup()
        results = _measure(args.rounds, args.jobs)
    finally:
        server.close()
    print(f"Redis CPU per ack (evalsha µs), {args.rounds} rounds of {args.jobs} jobs:")
    plain = results["plain"]
    for shape in SHAPES:
        ratios = [a / b for a, b in zip(results[shape], plain, strict=True)]
        print(
            f"  {shape:14} {statistics.median(results[shape]):6.2f}"
            f"  ratio to plain {statistics.median(ratios):.3f}"
            f" ({min(ratios):.3f}–{max(ratios):.3f})"
        )
    return 0


def _measure(rounds: int, jobs: int) -> dict[str, list[float]]:
    from django.conf import settings

    from bench.jobs import body, member, noop
    from django_rqueue.engine import commands, run
    from django_rqueue.engine.calls import new_request_id
    from django_rqueue.engine.queue_ref import queue_ref
    from django_rqueue.workflows import chord, group

    ref = queue_ref("bench")
    client = ref.client()

    def usec() -> int:
        stats: dict[str, Any] = client.info("commandstats")
        return int(stats.get("cmdstat_evalsha", {"usec": 0})["usec"])

    def acks(create: Callable[[], object]) -> float:
        client.flushall()
        create()
        held = []
        for _ in range(jobs):
            call = commands.reserve(
                ref.keys, lease_ms=60000, worker_id="w", count=1, request_id=new_request_id()
            )
            held.append(run.execute(client, call).jobs[0])
        before = usec()
        for job_id, fields in held:
            token = int(fields.get(b"token") or fields.get("token"))
            run.execute(client, commands.ack(ref.keys, job_id, token, "null", 600))
        return (usec() - before) / jobs

    def plain() -> None:
        noop.delay_many([((0.0, 0.0, ""), {}) for _ in range(jobs)])

    def members() -> None:
        chord([member.s(0.0, "") for _ in range(jobs)], body.s(0.0, "")).delay()

    def group_members() -> None:
        group(*(member.s(0.0, "") for _ in range(jobs))).delay()

    results: dict[str, list[float]] = {shape: [] for shape in SHAPES}
    base = dict(settings.RQUEUE)
    for _ in range(rounds):
        results["plain"].append(acks(plain))
        results["member inline"].append(acks(members))
        settings.RQUEUE = {**base, "WORKFLOW_FORCE_OUTBOX": True}
        try:
            results["member outbox"].append(acks(members))
        finally:
            settings.RQUEUE = base
        results["group member"].append(acks(group_members))
    return results


if __name__ == "__main__":
    sys.exit(main())
