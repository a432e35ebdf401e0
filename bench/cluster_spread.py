"""Redis CPU per job on one Redis and on a 3-master Redis Cluster, and how queues spread.

    python bench/cluster_spread.py [--queues 12] [--jobs 24000]

Runs the same work twice, first on one private ``redis-server``, then on a private
Redis Cluster of three masters (tests/support/redis_cluster.py): ``--jobs`` no-op jobs
spread evenly over ``--queues`` queues (``c0``, ``c1``, ...) with ``delay_many``, then
drained by ``rqueue_work --burst --concurrency 2`` serving every queue. Around each phase
it reads every master's ``INFO commandstats`` (the ``evalsha`` calls and microseconds)
and prints, per master: the queues whose hash tag (``{<queue>}``) lands there, the jobs
it holds, and its Redis CPU per job for the enqueue and for the drain; then the drain's
jobs/s and its script calls per job. Needs the repository's ``.venv``; 2 cores: run
nothing else meanwhile (the drain's rate on one host says nothing about a cluster's; its
Redis CPU per job does).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: What one side runs: enqueue, then drain, reading every master around each phase.
MEASURE = r"""
import json, os, subprocess, sys, tempfile
os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
import django
django.setup()
import redis
from bench.jobs import noop

queues = os.environ["BENCH_QUEUES"].split(",")
jobs = int(sys.argv[1])
masters = [redis.Redis.from_url(url) for url in json.loads(os.environ["BENCH_MASTERS"])]


def cpu():
    stats = [m.info("commandstats").get("cmdstat_evalsha", {}) for m in masters]
    return [(s.get("calls", 0), s.get("usec", 0)) for s in stats]


def spent(before, after):
    return [(b[0] - a[0], b[1] - a[1]) for a, b in zip(before, after)]


with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "ran")
    open(out, "w").close()
    start = cpu()
    for queue in queues:
        noop.using(queue=queue).delay_many([((0.0, 0.0, out), {})] * (jobs // len(queues)))
    queued = cpu()
    held = [m.dbsize() for m in masters]
    argv = [sys.executable, "-m", "django", "rqueue_work", "--burst", "--concurrency", "2"]
    subprocess.run([*argv, "--queues", ",".join(queues)], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    drained = cpu()
    with open(out) as f:
        ran = sorted(float(line.split()[2]) for line in f if line.strip())
print(json.dumps({
    "enqueue": spent(start, queued), "drain": spent(queued, drained), "keys": held,
    "ran": len(ran), "rate": (len(ran) - 1) / (ran[-1] - ran[0]),
}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queues", type=int, default=12)
    parser.add_argument("--jobs", type=int, default=24000)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    import json

    from redis.crc import key_slot

    from bench.checkouts import measure
    from tests.support.redis_cluster import LocalCluster
    from tests.support.redis_server import RedisServer

    queues = [f"c{n}" for n in range(args.queues)]
    jobs = args.jobs // args.queues * args.queues
    env = {"BENCH_QUEUES": ",".join(queues)}
    print(f"{jobs} jobs over {args.queues} queues, drained by rqueue_work --concurrency 2\n")
    with RedisServer() as server:
        alone = measure(
            "one Redis", REPO, MEASURE, [str(jobs)],
            {**env, "BENCH_REDIS_URL": server.url, "BENCH_MASTERS": json.dumps([server.url])},
        )  # fmt: skip
    with LocalCluster() as cluster:
        urls = [node.url for node in cluster.nodes]
        spread = measure(
            "cluster", REPO, MEASURE, [str(jobs)],
            {**env, "BENCH_REDIS_URL": cluster.url, "BENCH_REDIS_CLUSTER": "1",
             "BENCH_MASTERS": json.dumps(urls)},
        )  # fmt: skip
        home = {q: cluster.node_of(key_slot(f"{{{q}}}".encode())) for q in queues}
    print("| where | queues | keys | enqueue: Redis µs per job | drain: Redis µs per job |")
    print("| --- | --- | --- | --- | --- |")
    for label, result, names in [("one Redis", alone, [queues])] + [
        (f"master {n}", spread, [[q for q in queues if home[q] == n]]) for n in range(3)
    ]:
        n = 0 if label == "one Redis" else int(label.split()[1])
        per_queue = jobs // args.queues
        held = len(names[0]) * per_queue
        enqueue_us = result["enqueue"][n][1] / held if held else 0.0
        drain_us = result["drain"][n][1] / held if held else 0.0
        print(
            f"| {label} | {', '.join(names[0]) or '—'} | {result['keys'][n]} "
            f"| {enqueue_us:.1f} | {drain_us:.1f} |"
        )
    for label, result in (("one Redis", alone), ("cluster", spread)):
        total = sum(u for _c, u in result["enqueue"]) + sum(u for _c, u in result["drain"])
        calls = sum(c for c, _u in result["drain"])
        print(
            f"{label}: {result['ran']} jobs ran, drain {result['rate']:.0f} jobs/s, Redis CPU "
            f"{total / jobs:.1f} µs per job (enqueue + drain, every master), "
            f"{calls / jobs:.2f} script calls per drained job"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
