"""Redis CPU per job on one Redis and on a 3-master Redis Cluster, and how queues spread.

    python bench/cluster_spread.py [--queues 12] [--jobs 24000] [--delay] [--weighted]
    python bench/cluster_spread.py --queues 12 --plan 3

Runs the same work twice, first on one private ``redis-server``, then on a private
Redis Cluster of three masters (tests/support/redis_cluster.py): ``--jobs`` no-op jobs
spread evenly over ``--queues`` queues (``c0``, ``c1``, ...) with ``delay_many`` (with
``--delay``, one ``.delay()`` call each), then drained by
``rqueue_work --burst --concurrency 2`` serving every queue (in strict order, or with
``--weighted`` at equal weights, ``c0:1,c1:1,...``, so every queue, and every master, is
drained at once). Around each phase it reads every master's ``INFO commandstats`` (the
``evalsha`` calls and microseconds, the time inside the scripts only; the calls of every
command) and ``INFO cpu`` (``used_cpu_*_main_thread``, the thread that runs every command
and so bounds a master; ``used_cpu_sys + used_cpu_user``, the whole process). It prints a
markdown table, per master: the queues whose hash tag (``{<queue>}``) lands there, the
keys it holds, its main-thread CPU per job with the scripts' part beside it for the
enqueue and for the drain, its whole-process CPU per job, and how busy its main thread was
over the drain (CPU / the span from the first job's start to the last's). Then summary
lines: the drain's jobs/s, the Redis CPU per job over every master, the commands and
script calls per drained job, the jobs/s one master carries at full main-thread use
(10^6 / µs per job), and the worker processes' own CPU per job (``RUSAGE_CHILDREN`` of the
process that ran ``rqueue_work``). A first ``rqueue_work --burst`` on the empty queues
measures the worker's start and exit: its own CPU and the Redis CPU it causes are taken off
the drain's, so both are per job at a steady drain. Run it with the repository's venv
python; 2 cores: run nothing else meanwhile (the drain's rate on one host says nothing
about a cluster's; its CPU per job does).

``--plan MASTERS`` runs nothing: it prints which of that many masters (the slots split as
``redis-cli --cluster create`` splits them) holds each queue's hash tag, and how far the
busiest master is above the even share.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: What one side runs: enqueue, then drain, reading every master around each phase.
MEASURE = r"""
import json, os, resource, subprocess, sys, tempfile
os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
import django
django.setup()
import redis
from bench.jobs import noop

queues = os.environ["BENCH_QUEUES"].split(",")
served = os.environ["BENCH_SERVE"]
jobs = int(sys.argv[1])
masters = [redis.Redis.from_url(url) for url in json.loads(os.environ["BENCH_MASTERS"])]


def cpu():
    # Per master: evalsha calls, evalsha usec, main-thread CPU usec, process CPU usec,
    # calls of every command but INFO (this script's own reads).
    out = []
    for m in masters:
        stats = m.info("commandstats")
        script = stats.get("cmdstat_evalsha", {})
        c = m.info("cpu")
        main = c["used_cpu_sys_main_thread"] + c["used_cpu_user_main_thread"]
        every = sum(v["calls"] for k, v in stats.items() if k != "cmdstat_info")
        out.append((script.get("calls", 0), script.get("usec", 0), main * 1e6,
                    (c["used_cpu_sys"] + c["used_cpu_user"]) * 1e6, every))
    return out


def spent(before, after):
    return [[b - a for a, b in zip(x, y)] for x, y in zip(before, after)]


with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "ran")
    open(out, "w").close()
    argv = [sys.executable, "-m", "django", "rqueue_work", "--burst", "--concurrency", "2"]
    argv += ["--queues", served]
    # The worker's start and exit on empty queues (its CPU is the first RUSAGE_CHILDREN):
    # subtracted from the drain's CPU, and Redis's from the drain's Redis CPU.
    empty = cpu()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    idle = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = cpu()
    overhead = spent(empty, start)
    for queue in queues:
        if os.environ["BENCH_ONE_BY_ONE"]:
            for _ in range(jobs // len(queues)):
                noop.using(queue=queue).delay(0.0, 0.0, out)
        else:
            noop.using(queue=queue).delay_many([((0.0, 0.0, out), {})] * (jobs // len(queues)))
    queued = cpu()
    held = [m.dbsize() for m in masters]
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    drained = cpu()
    worker = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(out) as f:
        ran = sorted(float(line.split()[2]) for line in f if line.strip())
print(json.dumps({
    "enqueue": spent(start, queued), "drain": spent(overhead, spent(queued, drained)),
    "keys": held,
    "ran": len(ran), "span": ran[-1] - ran[0], "rate": (len(ran) - 1) / (ran[-1] - ran[0]),
    "worker_us": ((worker.ru_utime + worker.ru_stime) - (children.ru_utime + children.ru_stime)
                  - (idle.ru_utime + idle.ru_stime)) * 1e6,
}))
"""


def slot_ranges(masters: int) -> list[tuple[int, int]]:
    """The slots ``redis-cli --cluster create`` gives each of ``masters`` masters: 16384 / n
    each, as a float, the ends rounded (redis-cli.c, ``clusterManagerCommandCreate``)."""
    each, first, ranges = 16384 / masters, 0, []
    for n in range(masters):
        last = 16383 if n == masters - 1 else max(first, round(n * each + each - 1))
        ranges.append((first, last))
        first = last + 1
    return ranges


def plan(queues: list[str], masters: int) -> None:
    """Print where the hash tags of ``queues`` land on ``masters`` masters, nothing run."""
    from redis.crc import key_slot

    ranges = slot_ranges(masters)
    homes: list[list[str]] = [[] for _ in ranges]
    for queue in queues:
        slot = key_slot(f"{{{queue}}}".encode())
        homes[next(n for n, (a, b) in enumerate(ranges) if a <= slot <= b)].append(queue)
    print("| master | slots | queues | names |")
    print("| --- | --- | --- | --- |")
    for n, ((a, b), names) in enumerate(zip(ranges, homes, strict=True)):
        print(f"| {n} | {a}–{b} | {len(names)} | {', '.join(names) or '—'} |")
    busiest = max(len(names) for names in homes)
    print(
        f"\n{len(queues)} queues on {masters} masters: the busiest holds {busiest}, "
        f"{busiest * masters / len(queues):.2f}× the even share; "
        f"{sum(1 for names in homes if not names)} hold none"
    )


def per_job(usec: float, jobs: int) -> str:
    return f"{usec / jobs:.1f}" if jobs else "—"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queues", type=int, default=12)
    parser.add_argument("--jobs", type=int, default=24000)
    parser.add_argument(
        "--delay", action="store_true", help="enqueue with .delay() one by one, not delay_many"
    )
    parser.add_argument(
        "--plan",
        type=int,
        metavar="MASTERS",
        help="only print where the queues' hash tags land on that many masters (nothing run)",
    )
    parser.add_argument(
        "--weighted", action="store_true", help="drain the queues at equal weights, not in order"
    )
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from redis.crc import key_slot

    from bench.checkouts import measure
    from tests.support.redis_cluster import LocalCluster
    from tests.support.redis_server import RedisServer

    queues = [f"c{n}" for n in range(args.queues)]
    if args.plan:
        plan(queues, args.plan)
        return 0
    jobs = args.jobs // args.queues * args.queues
    served = ",".join(f"{q}:1" if args.weighted else q for q in queues)
    env = {
        "BENCH_QUEUES": ",".join(queues),
        "BENCH_SERVE": served,
        "BENCH_ONE_BY_ONE": "1" if args.delay else "",
    }
    order = "at equal weights" if args.weighted else "in strict order"
    how = ".delay() one by one" if args.delay else "delay_many"
    print(
        f"{jobs} jobs over {args.queues} queues enqueued with {how}, drained {order} "
        "by rqueue_work --concurrency 2\n"
    )
    with RedisServer() as server:
        alone = measure(
            "one Redis", REPO, MEASURE, [str(jobs)],
            {**env, "BENCH_REDIS_URL": server.url, "BENCH_MASTERS": json.dumps([server.url])},
            python=sys.executable,
        )  # fmt: skip
    with LocalCluster() as cluster:
        urls = [node.url for node in cluster.nodes]
        spread = measure(
            "cluster", REPO, MEASURE, [str(jobs)],
            {**env, "BENCH_REDIS_URL": cluster.url, "BENCH_REDIS_CLUSTER": "1",
             "BENCH_MASTERS": json.dumps(urls)},
            python=sys.executable,
        )  # fmt: skip
        home = {q: cluster.node_of(key_slot(f"{{{q}}}".encode())) for q in queues}
    print(
        "| where | queues | keys | enqueue: main-thread (scripts) µs per job "
        "| drain: main-thread (scripts) µs per job | whole process µs per job "
        "| drain: main thread busy |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    per_queue = jobs // args.queues
    rows = [("one Redis", alone, 0, queues)] + [
        (f"master {n}", spread, n, [q for q in queues if home[q] == n]) for n in range(3)
    ]
    for label, result, n, names in rows:
        held = len(names) * per_queue
        enq, drain = result["enqueue"][n], result["drain"][n]
        busy = drain[2] / 1e6 / result["span"]
        print(
            f"| {label} | {', '.join(names) or '—'} | {result['keys'][n]} "
            f"| {per_job(enq[2], held)} ({per_job(enq[1], held)}) "
            f"| {per_job(drain[2], held)} ({per_job(drain[1], held)}) "
            f"| {per_job(enq[3] + drain[3], held)} | {busy:.0%} |"
        )
    print()
    for label, result in (("one Redis", alone), ("cluster", spread)):
        main_us = sum(m[2] for m in result["enqueue"] + result["drain"]) / jobs
        script_us = sum(m[1] for m in result["enqueue"] + result["drain"]) / jobs
        process_us = sum(m[3] for m in result["enqueue"] + result["drain"]) / jobs
        calls = sum(m[0] for m in result["drain"])
        commands = sum(m[4] for m in result["drain"])
        print(
            f"{label}: {result['ran']} jobs ran, drain {result['rate']:.0f} jobs/s; Redis CPU per "
            f"job (enqueue + drain, every master): main thread {main_us:.1f} µs (scripts "
            f"{script_us:.1f}, whole process {process_us:.1f}); per drained job "
            f"{commands / jobs:.2f} commands, {calls / jobs:.2f} of them script calls; one master "
            f"at full main-thread use: {1e6 / main_us:.0f} jobs/s; worker processes' CPU "
            f"{result['worker_us'] / jobs:.1f} µs per job"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
