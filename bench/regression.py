"""The regression table: the hot paths of this checkout against another commit, interleaved.

    python bench/regression.py --against <commit> [--rounds 5] [--jobs 20000]
        [--layers none,middleware] [--columns delay,drain 1,...] [--body incr]

Checks out ``<commit>`` in a temporary git worktree and starts one private
redis-server. Each round runs, in turn, one process per side and layer (this
checkout with each layer, then the other commit without any; the order reversed
every other round), so a drifting host hits every column alike. A process
measures, against the emptied server:

- ``delay``: ``noop.delay()`` one by one, 3 000 calls, µs per call (wall clock);
- ``delay_many``: ``noop.delay_many()`` of ``--jobs`` calls, µs per job;
- ``drain 1`` / ``drain 2``: ``--jobs`` queued jobs drained by ``rqueue_work --burst``
  with 1 and 2 worker processes, jobs/s from the jobs' own timestamps
  (bench/record.py: first to last run, so the worker's start-up is left out);
- ``members 1``: a chord of ``--jobs`` members and its body, the members drained by one
  worker process, jobs/s as the drains: each member's ack also records its arrival on the
  body (and the last one releases it), which a plain job's ack does not;
- ``async 2``: 2 000 async jobs, each awaiting 0.1 s, drained by 2 worker processes
  running 100 at once each, jobs/s as the drains (as bench/README.md's async I/O drain);
- ``pickup``: 200 jobs enqueued one every 10 ms while a worker waits; the median of
  enqueue-to-run in ms.

Layers (this checkout only, set through bench/settings.py's environment):
``none``; ``middleware``: ``RQUEUE["MIDDLEWARE"]`` with bench/middleware_cost.py's
:class:`~bench.middleware_cost.Noop` (the hooks' machinery alone); ``otel``: the
OpenTelemetry middleware with the SDK's tracer provider and a batch processor
into an in-memory exporter, in the enqueuing process and in every worker process
(bench/tracing.py); ``encryption``: ``RQUEUE["ENCRYPTION_KEYS"]`` with one key made
for the run (arguments, results and errors encrypted at rest); ``sensitive``: the
synchronous columns run ``noop_sensitive``, the same job with ``@job(sensitive=("out",))``.
``--body incr``: every job's body also makes one ``INCR`` on Redis (bench/record.py's
"INCR body"). Prints, per column, every side's median and the median of the per-round ratios to
the other commit (ranges in brackets). Needs the repository's ``.venv`` and
redis-server; 2 cores: run nothing else meanwhile.
"""

from __future__ import annotations

import argparse
import base64
import os
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COLUMNS = ("delay", "delay_many", "drain 1", "drain 2", "members 1", "async 2", "pickup")

#: What one side runs (``python -c``), with PYTHONPATH and cwd at its checkout.
MEASURE = r"""
import json, os, statistics, subprocess, sys, tempfile, time
os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
import django
django.setup()
from bench.jobs import noop, sleepy
if os.environ.get("BENCH_LAYER") == "otel":
    from bench.tracing import set_up
    set_up()
if os.environ.get("BENCH_LAYER") == "sensitive":
    from bench.jobs import noop_sensitive as noop
from django_rqueue.engine.connection import get_client

jobs = int(sys.argv[1])
columns = sys.argv[2].split(",")
client = get_client("bench")
out = {}
python = sys.executable


def read(path):
    with open(path) as f:
        return [tuple(map(float, line.split())) for line in f if line.strip()]


def worker(processes, *more):
    argv = [python, "-m", "django", "rqueue_work", "--queues", "bench", "--burst"]
    return [*argv, "--concurrency", str(processes), *more]


def drain(column, job, count, processes, *more, members=False):
    client.flushall()
    path = os.path.join(tmp, column)
    open(path, "w").close()
    if members:
        from django_rqueue.workflows import chord
        chord([job.si(0.0, 0.0, path) for _ in range(count)], job.si(0.0, 0.0, "")).delay()
    else:
        job.delay_many([((0.0, 0.0, path), {}) for _ in range(count)])
    subprocess.run(worker(processes, *more), check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    ran = sorted(r[2] for r in read(path))
    if len(ran) != count:
        raise SystemExit(f"{column}: {len(ran)} of {count} jobs ran")
    out[column] = (count - 1) / (ran[-1] - ran[0])


client.flushall()
noop.delay(0.0, 0.0, "")  # load the script, open the connection
client.flushall()
if "delay" in columns:
    started = time.perf_counter()
    for _ in range(3000):
        noop.delay(0.0, 0.0, "")
    out["delay"] = (time.perf_counter() - started) / 3000 * 1e6
    client.flushall()
if "delay_many" in columns:
    calls = [((0.0, 0.0, ""), {}) for _ in range(jobs)]
    started = time.perf_counter()
    noop.delay_many(calls)
    out["delay_many"] = (time.perf_counter() - started) / jobs * 1e6
with tempfile.TemporaryDirectory() as tmp:
    if "drain 1" in columns:
        drain("drain 1", noop, jobs, 1)
    if "drain 2" in columns:
        drain("drain 2", noop, jobs, 2)
    if "members 1" in columns:
        drain("members 1", noop, jobs, 1, members=True)
    if "async 2" in columns:
        drain("async 2", sleepy, 2000, 2, "--async-concurrency", "100")
    if "pickup" not in columns:
        print(json.dumps(out))
        sys.exit(0)
    client.flushall()
    path = os.path.join(tmp, "pickup")
    open(path, "w").close()
    argv = [python, "-m", "django", "rqueue_work", "--queues", "bench", "--concurrency", "1"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        probe = os.path.join(tmp, "ready")
        open(probe, "w").close()
        deadline = time.monotonic() + 60
        while not read(probe):  # the worker is up once a job ran
            if time.monotonic() > deadline:
                raise SystemExit("the pickup worker did not start")
            noop.delay(0.0, 0.0, probe)
            time.sleep(0.2)
        start = time.perf_counter()
        for i in range(200):
            while time.perf_counter() < start + i * 0.01:
                pass
            noop.delay(time.time(), 0.0, path)
        deadline = time.monotonic() + 60
        while len(read(path)) < 200:
            if time.monotonic() > deadline:
                raise SystemExit("pickup: jobs did not run")
            time.sleep(0.05)
        out["pickup"] = statistics.median((r[2] - r[0]) * 1000 for r in read(path))
    finally:
        proc.terminate()
        proc.wait(30)
print(json.dumps(out))
"""


def _median_range(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}–{max(values):.3f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", required=True, help="the commit to compare with")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument(
        "--layers",
        default="none",
        help="comma-separated: none, middleware, otel, encryption, sensitive",
    )
    parser.add_argument(
        "--body",
        choices=("append", "incr"),
        default="append",
        help="the jobs' body: the record alone, or one INCR on Redis too (bench/record.py)",
    )
    parser.add_argument(
        "--columns",
        default=",".join(COLUMNS),
        help=f"comma-separated, of: {', '.join(COLUMNS)} (default: all)",
    )
    args = parser.parse_args()
    layers = [layer for layer in args.layers.split(",") if layer]
    columns = [column for column in args.columns.split(",") if column]
    if unknown := set(columns) - set(COLUMNS):
        parser.error(f"unknown columns: {', '.join(sorted(unknown))}")
    sys.path.insert(0, str(REPO))
    from bench.checkouts import measure, other_checkout
    from tests.support.redis_server import RedisServer

    key = base64.urlsafe_b64encode(os.urandom(32)).decode()  # a Fernet key for this run only
    sides = [(f"this, {layer}", REPO, layer) for layer in layers]
    with other_checkout(args.against) as other:
        sides.append((f"{args.against}, none", other, "none"))
        server = RedisServer().start()
        results: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in sides}
        try:
            for round_ in range(args.rounds):
                # ABBA: the side that goes first in a round runs measurably slower on this
                # host (an A/A run showed it), so the order flips every round.
                for name, path, layer in sides if round_ % 2 == 0 else sides[::-1]:
                    env = {
                        "BENCH_REDIS_URL": server.url,
                        "BENCH_LAYER": layer,
                        "BENCH_ENCRYPTION_KEY": key,
                        "BENCH_JOB_BODY": args.body,
                    }
                    results[name].append(
                        measure(name, path, MEASURE, [str(args.jobs), ",".join(columns)], env)
                    )
        finally:
            server.close()
    base = sides[-1][0]
    print(
        f"{args.rounds} rounds, {args.jobs} jobs per drain; medians, then the median ratio "
        f"to {base} (range); delay and delay_many in µs per job, drains in jobs/s, pickup in ms"
    )
    print("| side | " + " | ".join(columns) + " |")
    print("| --- |" + " --- |" * len(columns))
    for name, _, _ in sides:
        cells = []
        for column in columns:
            mine = [r[column] for r in results[name]]
            cell = f"{statistics.median(mine):.1f}"
            if name != base:
                theirs = [r[column] for r in results[base]]
                cell += " · " + _median_range([a / b for a, b in zip(mine, theirs, strict=True)])
            cells.append(cell)
        print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
