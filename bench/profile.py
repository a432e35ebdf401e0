"""Where django-rqueue's time goes: pyinstrument profiles and Redis commands per job.

Run in the bench venv (after ``python bench/run.py`` created it)::

    PYTHONPATH=. bench/.venv-peers/bin/python -m bench.profile [--jobs 20000] [--html DIR]

1. ``.delay()`` one by one and ``.delay_many()``: pyinstrument, in process.
2. The worker's child loop (``Worker.run`` in burst mode, no poller) draining
   the same jobs: pyinstrument, in process.
3. A real ``manage.py rqueue_work --concurrency 1`` draining them: Redis
   ``INFO commandstats`` before/after, i.e. commands (round trips, for calls
   not pipelined) per job and Redis CPU µs per job, master included.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.support.redis_server import RedisServer

REPO = Path(__file__).resolve().parents[1]


def commandstats(client: Any) -> dict[str, tuple[int, float]]:
    stats = client.info("commandstats")
    return {k.removeprefix("cmdstat_"): (v["calls"], v["usec"]) for k, v in stats.items()}


def diff(before: dict[str, tuple[int, float]], after: dict[str, tuple[int, float]], n: int) -> str:
    rows = []
    for cmd, (calls, usec) in after.items():
        c0, u0 = before.get(cmd, (0, 0.0))
        if calls - c0:
            rows.append((cmd, (calls - c0) / n, (usec - u0) / n))
    rows.sort(key=lambda r: -r[1])
    total = sum(r[1] for r in rows), sum(r[2] for r in rows)
    lines = [f"  {cmd:<14} {calls:6.2f} calls/job {usec:7.1f} µs/job" for cmd, calls, usec in rows]
    lines.append(f"  {'TOTAL':<14} {total[0]:6.2f} calls/job {total[1]:7.1f} µs/job (Redis CPU)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--html", default=None, help="also write pyinstrument HTML here")
    args = parser.parse_args()
    n = args.jobs

    from pyinstrument import Profiler

    server = RedisServer().start()
    os.environ["BENCH_REDIS_URL"] = server.url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    import django

    django.setup()
    from bench.jobs import noop
    from django_rqueue.worker.loop import Worker

    client = server.client()

    def profiled(label: str, body: Any) -> None:
        before = commandstats(client)
        profiler = Profiler(interval=0.0005)
        t = time.perf_counter()
        with profiler:
            body()
        elapsed = time.perf_counter() - t
        print(f"\n=== {label}: {n / elapsed:,.0f} jobs/s, {elapsed / n * 1e6:.0f} µs/job")
        print(diff(before, commandstats(client), n))
        print(profiler.output_text(unicode=True, color=False, show_all=False))
        if args.html:
            Path(args.html).mkdir(parents=True, exist_ok=True)
            slug = label.split()[0].strip(".()")
            (Path(args.html) / f"{slug}.html").write_text(profiler.output_html())

    try:
        client.flushall()
        profiled(".delay() one by one", lambda: [noop.delay(0.0, 0.0, "") for _ in range(n)])
        profiled(
            "worker child loop (Worker.run burst)",
            lambda: Worker(["bench"], burst=True, with_poller=False).run(),
        )
        client.flushall()
        profiled(".delay_many()", lambda: noop.delay_many([((0.0, 0.0, ""), {}) for _ in range(n)]))
        before = commandstats(client)
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        argv = [sys.executable, "-m", "django", "rqueue_work", "--queues", "bench"]
        proc = subprocess.Popen(
            [*argv, "--concurrency", "1"],
            env=env,
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        t = time.perf_counter()  # (this loop's own ZCARDs show up in the counts below)
        while client.zcard("rqueue:{bench}:prios") or client.zcard("rqueue:{bench}:reserved"):
            time.sleep(0.05)
        elapsed = time.perf_counter() - t
        proc.terminate()
        proc.wait(timeout=15)
        print(f"\n=== rqueue_work --concurrency 1 drain: ~{n / elapsed:,.0f} jobs/s incl. start-up")
        print(diff(before, commandstats(client), n))
    finally:
        client.close()
        server.close()


if __name__ == "__main__":
    main()
