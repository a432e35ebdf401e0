"""Where a drain's CPU goes: µs of CPU per job by process, django-rqueue beside Huey.

Run in the bench venv (after ``python bench/run.py`` created it)::

    PYTHONPATH=. bench/.venv-peers/bin/python -m bench.cpu_split [--procs 2] [--body incr]

For each system, one after the other against one private ``redis-server``:
queue ``--jobs`` jobs with its bulk API, start its workers as the harness
does (:func:`bench.harness.workers`), wait for the first job, then read,
over ``--window`` seconds, the jobs run (the job file, bench/record.py) and
the CPU time (user + system, psutil) that Redis and every worker process
spent. Each row is one process: its µs of CPU per job run in the window, and
its share of one core. The total against the host's cores says whether the
drain is CPU-bound (a total near ``cores × 100 %``) or waits on round trips.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from bench import record
from bench.harness import wait_count, workers
from bench.systems import load
from tests.support.redis_server import RedisServer

SYSTEMS = ("django-rqueue", "Huey")


def _cpu(process: psutil.Process) -> float:
    """Seconds of CPU (user + system) ``process`` has spent; 0 once it is gone."""
    try:
        times = process.cpu_times()
    except psutil.NoSuchProcess:
        return 0.0
    return times.user + times.system


def _label(process: psutil.Process, redis_pid: int) -> str:
    if process.pid == redis_pid:
        return "redis-server"
    try:
        parent = process.parent()
        command = " ".join(os.path.basename(arg) for arg in process.cmdline()[1:4])
    except psutil.NoSuchProcess:
        return f"pid {process.pid} (gone)"
    # "started": a process the harness started (rqueue_work's master); "child": one it forked.
    role = "child" if parent is not None and parent.pid != os.getpid() else "started"
    return f"{command[:40]} ({role} {process.pid})"


def measure(
    name: str, server: RedisServer, procs: int, body: str, jobs: int, window: float
) -> None:
    system = load(name)
    client = server.client()
    me = psutil.Process()
    redis_process = psutil.Process(server.pid)
    with tempfile.TemporaryDirectory(prefix="cpu-split-") as tmp:
        out = str(Path(tmp) / "jobs.txt")
        client.flushall()
        system.after_flush()
        if system.has_bulk:
            system.enqueue_bulk(jobs, out)
        else:
            system.enqueue_one(jobs, out)
        with workers(system, procs, server.url, Path(tmp), body=body):
            if wait_count(out, 1, 90) < 1:
                raise RuntimeError(f"{name}: no job ran within 90 s of starting the workers")
            time.sleep(0.3)  # past start-up
            processes = [redis_process, *me.children(recursive=True)]
            processes = list({p.pid: p for p in processes}.values())
            before = {p.pid: _cpu(p) for p in processes}
            stats_before = client.info("commandstats")
            ran_before, started = record.count(out), time.monotonic()
            time.sleep(window)
            after = {p.pid: _cpu(p) for p in processes}
            stats_after = client.info("commandstats")
            ran, elapsed = record.count(out) - ran_before, time.monotonic() - started
            labels = {p.pid: _label(p, redis_process.pid) for p in processes}
    system.close()
    if ran <= 0:
        print(f"{name}: no job ran in the window (the queue drained first: raise --jobs)")
        return
    print(f"\n{name}, {procs} process(es), {body} body: {ran / elapsed:,.0f} jobs/s")
    rows = []
    for process in processes:
        spent = after[process.pid] - before[process.pid]
        if spent > 0.002:
            rows.append((spent, labels[process.pid]))
    total = 0.0
    for spent, label in sorted(rows, reverse=True):
        total += spent
        print(f"  {label:<56} {spent / ran * 1e6:7.1f} µs/job {spent / elapsed:6.0%} of a core")
    print(f"  {'total':<56} {total / ran * 1e6:7.1f} µs/job {total / elapsed:6.0%} of a core")
    print("  Redis commands (INFO commandstats), per job run in the window:")
    for command, calls, usec in _commands(stats_before, stats_after):
        if calls / ran >= 0.01:
            print(f"    {command:<28} {calls / ran:6.2f} calls/job {usec / ran:7.1f} µs/job")


def _commands(before: dict[str, Any], after: dict[str, Any]) -> list[tuple[str, int, float]]:
    """``(command, calls, µs)`` run between two ``INFO commandstats`` reads, most µs first
    (the ``INFO`` call itself is left out)."""
    rows = []
    for key, stats in after.items():
        command = key.removeprefix("cmdstat_")
        if command == "info":
            continue
        old = before.get(key, {"calls": 0, "usec": 0})
        rows.append((command, stats["calls"] - old["calls"], float(stats["usec"] - old["usec"])))
    return sorted((row for row in rows if row[1] > 0), key=lambda row: -row[2])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--procs", type=int, default=2)
    parser.add_argument("--body", choices=("append", "incr"), default="incr")
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--window", type=float, default=1.5, help="seconds measured")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    server = RedisServer().start()
    os.environ["BENCH_REDIS_URL"] = server.url
    print(f"{psutil.cpu_count()} CPUs; {args.jobs} jobs queued, {args.window} s measured")
    try:
        for name in SYSTEMS:
            measure(name, server, args.procs, args.body, args.jobs, args.window)
    finally:
        server.close()


if __name__ == "__main__":
    main()
