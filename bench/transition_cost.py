"""Redis CPU per transition of a plain job, this checkout against another commit, interleaved.

    python bench/transition_cost.py --against <commit> [--rounds 5] [--jobs 3000]

Checks out ``<commit>`` in a temporary git worktree, starts one private redis-server, and
runs, in turn (this checkout, the other, this, the other, ...), a process that enqueues
``--jobs`` no-op jobs with ``.delay()``, reserves each, and acks each, reading Redis's
``INFO commandstats`` (the ``evalsha`` microseconds) around each phase. Prints, per phase,
both medians in µs per job and the median of the per-round ratios (this / other): what a
change of the Lua costs a job that does not use the new feature, with the host's drift
shared by both sides. Needs only the repository's own venv (``.venv``) and redis-server.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PHASES = ("enqueue", "reserve", "ack")

#: What one side runs (``python -c``), with PYTHONPATH at its checkout.
MEASURE = """
import json, os, sys
os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
import django
django.setup()
from bench.jobs import noop
from django_rqueue.engine import commands, run
from django_rqueue.engine.calls import new_request_id
from django_rqueue.engine.queue_ref import queue_ref

n = int(sys.argv[1])
ref = queue_ref("bench")
client = ref.client()


def usec():
    return client.info("commandstats").get("cmdstat_evalsha", {"usec": 0})["usec"]


client.flushall()
u = usec()
for _ in range(n):
    noop.delay(0.0, 0.0, "")
costs = {"enqueue": (usec() - u) / n}
held = []
u = usec()
for _ in range(n):
    call = commands.reserve(
        ref.keys, lease_ms=60000, worker_id="w", count=1, request_id=new_request_id()
    )
    held.append(run.execute(client, call).jobs[0])
costs["reserve"] = (usec() - u) / n
u = usec()
for job_id, fields in held:
    token = int(fields.get(b"token") or fields.get("token"))
    run.execute(client, commands.ack(ref.keys, job_id, token, "null", 600))
costs["ack"] = (usec() - u) / n
print(json.dumps(costs))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", required=True, help="the commit to compare with")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=3000)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from bench.checkouts import measure, other_checkout
    from tests.support.redis_server import RedisServer

    with other_checkout(args.against) as other:
        server = RedisServer().start()
        results: dict[str, list[dict[str, float]]] = {"this": [], "other": []}
        try:
            for _ in range(args.rounds):
                for side, path in (("this", REPO), ("other", other)):
                    env = {"BENCH_REDIS_URL": server.url}
                    results[side].append(measure(side, path, MEASURE, [str(args.jobs)], env))
        finally:
            server.close()
    print(
        f"Redis CPU per job (evalsha µs), {args.rounds} rounds of {args.jobs} jobs, "
        f"this checkout against {args.against}:"
    )
    for phase in PHASES:
        this = [r[phase] for r in results["this"]]
        that = [r[phase] for r in results["other"]]
        ratios = [a / b for a, b in zip(this, that, strict=True)]
        print(
            f"  {phase:8} this {statistics.median(this):6.2f}  other {statistics.median(that):6.2f}"
            f"  ratio {statistics.median(ratios):.3f} ({min(ratios):.3f}–{max(ratios):.3f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
