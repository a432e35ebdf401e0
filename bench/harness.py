"""The measurements: runs every system through the same phases on one private redis-server.

Runs inside ``bench/.venv-peers`` (``bench/run.py`` creates it and re-executes here).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import json
import os
import platform
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import redis

from bench import ceiling, flow, record, scale, workflows
from bench.systems import DISTRIBUTIONS, MODULES, REPO, System, load
from tests.support.redis_server import RedisServer

BENCH = REPO / "bench"
#: Alternating chunks of the enqueue-one-by-one phase when a system has a second
#: one-by-one API (django.tasks), so both see the same minute of a drifting host.
ENQUEUE_CHUNKS = 10


@dataclass(frozen=True)
class Params:
    runs: int
    one: int  # jobs enqueued one by one
    drain: int  # jobs queued, then drained (also: bulk enqueue and memory)
    drain_cap: float  # seconds: a drain still running then is cut (rate from what ran)
    latency: int  # jobs of the latency at 200 jobs/s, ``gap`` s apart
    gap: float
    latency_slow: int  # jobs of the latency at 20 jobs/s, ``gap_slow`` s apart
    gap_slow: float
    lateness: int
    scale_small: int
    scale_big: int
    scale_groups: int
    scale_ops: int
    async_jobs: int  # async jobs (each awaits ASYNC_SLEEP) queued, then drained
    wf_members: int = 10_000  # members of the chord (bench/workflows.py)
    wf_cap: float = 120.0  # seconds: a chord still waiting for its body then is cut

    @classmethod
    def full(cls, runs: int) -> Params:
        return cls(
            runs, 5000, 20000, 25.0, 500, 0.005, 100, 0.05, 200, 1000, 1_000_000, 10_000, 3000, 2000
        )

    @classmethod
    def smoke(cls) -> Params:
        return cls(1, 200, 1000, 10.0, 40, 0.005, 10, 0.05, 10, 100, 5000, 200, 200, 200, 200, 30.0)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# -- workers -------------------------------------------------------------------------------


@contextlib.contextmanager
def workers(
    system: System,
    processes: int,
    url: str,
    logdir: Path,
    *,
    asynchronous: bool = False,
    body: str = "append",
) -> Iterator[None]:
    """Start the system's worker processes (own process groups); stop them on exit.

    ``asynchronous``: the workers of the async I/O drain (``async_worker_argvs``).
    ``body``: the job body, ``"append"`` or ``"incr"`` (bench/record.py).
    """
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "BENCH_REDIS_URL": url,
        "BENCH_JOB_BODY": body,
        "PYTHONUNBUFFERED": "1",
        **system.worker_env(),
    }
    procs = []
    safe = system.name.split()[0].lower() + ("-async" if asynchronous else "")
    argvs = system.async_worker_argvs(processes) if asynchronous else system.worker_argvs(processes)
    for i, argv in enumerate(argvs):
        logfile = open(logdir / f"{safe}-w{processes}-{i}.log", "ab")
        procs.append(
            (
                subprocess.Popen(
                    argv,
                    cwd=REPO,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=logfile,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                ),
                logfile,
            )
        )
    try:
        yield
    finally:
        for proc, _ in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for proc, logfile in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            with contextlib.suppress(ProcessLookupError):  # children left in the group
                os.killpg(proc.pid, signal.SIGKILL)
            logfile.close()


def wait_count(out: str, n: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    got = record.count(out)
    while got < n and time.monotonic() < deadline:
        time.sleep(0.02)
        got = record.count(out)
    return got


def warm_up(system: System, out: str) -> None:
    """Run a few jobs through freshly started workers, so they are up and idle."""
    system.enqueue_one(5, out)
    if wait_count(out, 5, 90) < 5:
        raise RuntimeError("workers did not run 5 warm-up jobs within 90 s")
    time.sleep(1.0)


# -- phases --------------------------------------------------------------------------------


class Run:
    def __init__(self, params: Params, server: RedisServer, tmp: Path) -> None:
        self.p = params
        self.server = server
        self.client = server.client()
        self.tmp = tmp
        self.n = 0

    def out(self, label: str) -> str:
        self.n += 1
        return str(self.tmp / f"{self.n:04d}-{label}.txt")

    def flush(self, system: System) -> None:
        self.client.flushall()
        system.after_flush()

    def used_memory(self) -> int:
        return int(self.client.info("memory")["used_memory"])

    def measure(self, system: System) -> dict[str, Any]:
        """One run of every phase; a phase that fails is recorded as an error, not fatal."""
        p, res = self.p, {}
        url = self.server.url

        def phase(name: str, body: Callable[[], dict[str, Any]]) -> None:
            try:
                res.update(body())
            except Exception as exc:  # report, go on with the next phase
                log(f"  {system.name}: phase {name} failed: {exc!r}")
                res.setdefault("errors", []).append(f"{name}: {exc!r}")
                traceback.print_exc(limit=2)

        def enqueue_one() -> dict[str, Any]:
            """The one-by-one APIs (``enqueue_one``; ``enqueue_tasks`` too when the system
            has one) and the ceiling probes (bench/ceiling.py) in alternating chunks, in
            this process: the host's drift hits all of them alike."""
            self.flush(system)
            chunk = max(1, p.one // ENQUEUE_CHUNKS)
            calls: list[tuple[str, Callable[[int, str], None]]] = [
                ("enqueue_one", system.enqueue_one)
            ]
            if system.has_tasks:
                calls.append(("enqueue_tasks", system.enqueue_tasks))
            spent = dict.fromkeys([key for key, _ in calls], 0.0)
            probes = ceiling.Ceiling(url)
            try:
                for _ in range(ENQUEUE_CHUNKS):
                    for key, call in calls:
                        t = time.perf_counter()
                        call(chunk, "")
                        spent[key] += time.perf_counter() - t
                    probes.run(chunk)
                probes.cleanup()
                rates = probes.rates()
            finally:
                probes.close()
            result: dict[str, Any] = {
                key: chunk * ENQUEUE_CHUNKS / seconds for key, seconds in spent.items()
            }
            result["ceiling"] = rates
            return result

        def fill(out: str) -> dict[str, Any]:
            self.flush(system)
            before = self.used_memory()
            t = time.perf_counter()
            if system.has_bulk:
                system.enqueue_bulk(p.drain, out)
            else:
                system.enqueue_one(p.drain, out)
            elapsed = time.perf_counter() - t
            result: dict[str, Any] = {"bytes_per_job": (self.used_memory() - before) / p.drain}
            if system.has_bulk:
                result["enqueue_bulk"] = p.drain / elapsed
            return result

        def drain(processes: int, body: str = "append") -> dict[str, Any]:
            # The file name is in every job's payload: the plain drains keep the name they
            # always had, so "Redis bytes per queued job" stays comparable across runs.
            out = self.out(f"drain{processes}" + ("" if body == "append" else f"-{body}"))
            filled = fill(out)
            # Bulk rate and memory: once per run.
            result = filled if processes == 1 and body == "append" else {}
            with workers(system, processes, url, self.tmp, body=body):
                if wait_count(out, 1, 90) < 1:
                    raise RuntimeError("no job ran within 90 s of starting the workers")
                first = min(r[2] for r in record.read(out))
                left = p.drain_cap - (time.time() - first)
                got = wait_count(out, p.drain, max(0.0, left))
            rows = record.read(out)
            ran = sorted(r[2] for r in rows)
            rate = (len(ran) - 1) / (ran[-1] - ran[0]) if len(ran) > 1 else 0.0
            key = f"drain_{processes}" + ("" if body == "append" else f"_{body}")
            result[key] = rate
            result[f"{key}_capped"] = got < p.drain
            return result

        def async_drain() -> dict[str, Any]:
            out = self.out("async")
            self.flush(system)
            system.enqueue_async(p.async_jobs, out)
            with workers(system, 2, url, self.tmp, asynchronous=True):
                if wait_count(out, 1, 90) < 1:
                    raise RuntimeError("no async job ran within 90 s of starting the workers")
                first = min(r[2] for r in record.read(out))
                left = p.drain_cap - (time.time() - first)
                got = wait_count(out, p.async_jobs, max(0.0, left))
            ran = sorted(r[2] for r in record.read(out))
            rate = (len(ran) - 1) / (ran[-1] - ran[0]) if len(ran) > 1 else 0.0
            return {"async_drain": rate, "async_drain_capped": got < p.async_jobs}

        def latency_and_lateness() -> dict[str, Any]:
            self.flush(system)
            result: dict[str, Any] = {}
            with workers(system, 1, url, self.tmp):
                warm_up(system, self.out("warm"))
                for key, jobs, gap in (
                    ("latency", p.latency, p.gap),
                    ("latency_slow", p.latency_slow, p.gap_slow),
                ):
                    out = self.out(key)
                    system.enqueue_paced(jobs, gap, out)
                    wait_count(out, jobs, 30)
                    lat = [(ran - sent) * 1000 for sent, _, ran in record.read(out)]
                    if len(lat) < jobs:
                        raise RuntimeError(f"{key}: only {len(lat)}/{jobs} jobs ran in 30 s")
                    result[f"{key}_p50"], result[f"{key}_p99"] = pct(lat, 50), pct(lat, 99)
                out = self.out("lateness")
                rnd = random.Random(4)
                now = time.time()
                dues = sorted(now + 1 + 2 * rnd.random() for _ in range(p.lateness))
                system.enqueue_delayed(dues, out)
                wait_count(out, p.lateness, max(dues) - time.time() + 20)
                late = [(ran - due) * 1000 for _, due, ran in record.read(out)]
                if len(late) < p.lateness:
                    raise RuntimeError(f"lateness: only {len(late)}/{p.lateness} jobs ran")
                result["lateness_p50"], result["lateness_p99"] = pct(late, 50), pct(late, 99)
            return result

        phase("enqueue_one", enqueue_one)
        phase("drain_1", lambda: drain(1))
        phase("drain_2", lambda: drain(2))
        phase("drain_1_incr", lambda: drain(1, "incr"))
        phase("drain_2_incr", lambda: drain(2, "incr"))
        if system.has_async:
            phase("async_drain", async_drain)
        phase("latency", latency_and_lateness)
        phase("flush", lambda: self.flush(system) or {})
        return res


def measure_workflows(
    run: Run, systems: dict[str, System], params: Params
) -> dict[str, list[dict[str, Any]]]:
    """The chord side by side (bench/workflows.py), ``params.runs`` rounds, systems in turn."""
    composing = {name: s for name, s in systems.items() if s.has_workflows}
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in composing}
    for i in range(params.runs):
        for name, system in composing.items():
            log(f"workflows {i + 1}/{params.runs}: {name}")
            try:
                measured = workflows.measure(
                    system,
                    params.wf_members,
                    params.wf_cap,
                    lambda system=system: run.flush(system),
                    lambda s, n: workers(s, n, run.server.url, run.tmp),
                    run.out,
                )
            except Exception as exc:  # a peer's failure is reported, not fatal
                log(f"  {name}: workflows failed: {exc!r}")
                measured = {"errors": [repr(exc)]}
            results[name].append(measured)
            log(f"  {name}: {fmt_run(measured)}")
    return results


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


# -- environment ---------------------------------------------------------------------------


def versions(server_client: redis.Redis) -> dict[str, str]:
    out = {
        "python": platform.python_version(),
        "redis-server": str(server_client.info("server")["redis_version"]),
    }
    for dist in ["redis", "hiredis", *[d for ds in DISTRIBUTIONS.values() for d in ds]]:
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[dist] = metadata.version(dist)
    return out


def machine() -> dict[str, Any]:
    model = ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {"nproc": os.cpu_count(), "cpu": model, "kernel": platform.release()}


# -- table ---------------------------------------------------------------------------------

COLUMNS = [
    ("enqueue one by one (jobs/s)", ["enqueue_one"], 0),
    ("enqueue via django.tasks (jobs/s)", ["enqueue_tasks"], 0),
    ("bulk enqueue (jobs/s)", ["enqueue_bulk"], 0),
    ("drain, 1 proc (jobs/s)", ["drain_1"], 0),
    ("drain, 2 procs (jobs/s)", ["drain_2"], 0),
    ("drain with an INCR body, 1 / 2 procs (jobs/s)", ["drain_1_incr", "drain_2_incr"], 0),
    ("async I/O drain, 2 procs (jobs/s)", ["async_drain"], 0),
    ("latency at 200 jobs/s p50 / p99 (ms)", ["latency_p50", "latency_p99"], 1),
    ("latency at 20 jobs/s p50 / p99 (ms)", ["latency_slow_p50", "latency_slow_p99"], 1),
    ("delayed lateness p50 / p99 (ms)", ["lateness_p50", "lateness_p99"], 1),
    ("Redis bytes per queued job", ["bytes_per_job"], 0),
]


def ceiling_table(results: dict[str, Any]) -> str:
    """Each system's enqueue one by one and drains against the ceilings measured in its own
    enqueue phase (bench/ceiling.py), medians over the runs."""
    probe_names = list(ceiling.PROBES)
    head = ["system", *(f"{ceiling.PROBES[n]} (ops/s)" for n in probe_names)]
    head += ["enqueue one by one, % of EVALSHA HSET + LPUSH", "drain 1 / 2 procs, % of it"]
    lines = ["| " + " | ".join(head) + " |", "| --- " * len(head) + "|"]
    for name, data in results["systems"].items():
        runs = [r for r in data["runs"] if "ceiling" in r]
        if not runs:
            continue
        probes = {
            n: statistics.median(r["ceiling"][n] for r in runs if n in r["ceiling"])
            for n in probe_names
        }
        two = [r["ceiling"].get("evalsha_two_writes") for r in runs]

        def share(key: str, runs: list[dict[str, Any]] = runs, two: list[Any] = two) -> str:
            pairs = [(r[key], c) for r, c in zip(runs, two, strict=True) if key in r and c]
            if not pairs:
                return "—"
            return f"{statistics.median(100 * v / c for v, c in pairs):.0f} %"

        cells = [f"{probes[n]:,.0f}" for n in probe_names]
        cells += [share("enqueue_one"), f"{share('drain_1')} / {share('drain_2')}"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def cell(values: list[float], digits: int, runs: int) -> str:
    if not values:
        return "—"
    med = statistics.median(values)
    fmt = f"{{:,.{digits}f}}"
    if runs > 1 and len(values) > 1:
        return f"{fmt.format(med)} ({fmt.format(min(values))}–{fmt.format(max(values))})"
    return fmt.format(med)


def table(results: dict[str, Any], runs: int) -> str:
    head = "| system | " + " | ".join(c[0] for c in COLUMNS) + " |"
    lines = [head, "| --- " * (len(COLUMNS) + 1) + "|"]
    for name, data in results["systems"].items():
        cells = []
        for _, keys, digits in COLUMNS:
            parts = []
            for key in keys:
                values = [r[key] for r in data["runs"] if key in r]
                text = cell(values, digits, runs)
                if any(r.get(f"{key}_capped") for r in data["runs"]):
                    text += "*"
                parts.append(text)
            cells.append(" / ".join(parts))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    for name, reason in results["skipped"].items():
        lines.append(f"| {name} | skipped: {reason} |" + " |" * (len(COLUMNS) - 1))
    return "\n".join(lines)


# -- main ----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="tiny counts, one run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default="", help="comma-separated system names (prefixes)")
    parser.add_argument("--no-scale", action="store_true", help="skip the django-rqueue scale test")
    parser.add_argument(
        "--no-flow", action="store_true", help="skip the flow-control reserve cost (bench/flow.py)"
    )
    parser.add_argument(
        "--no-workflows", action="store_true", help="skip the chords (bench/workflows.py)"
    )
    parser.add_argument(
        "--workflows-only", action="store_true", help="run only the chords (bench/workflows.py)"
    )
    parser.add_argument("--members", type=int, default=0, help="chord members (default 10 000)")
    parser.add_argument("--output", default=None, help="JSON path (default bench/results-*.json)")
    parser.add_argument("--skipped", default="{}", help=argparse.SUPPRESS)  # from run.py
    args = parser.parse_args(argv)
    params = Params.smoke() if args.smoke else Params.full(args.runs)
    if args.members:
        params = dataclasses.replace(params, wf_members=args.members)

    skipped: dict[str, str] = json.loads(args.skipped)
    names = [n for n in MODULES if n not in skipped]
    if args.only:
        wanted = [w.strip().lower() for w in args.only.split(",")]
        names = [n for n in names if any(n.lower().startswith(w) for w in wanted)]

    tmp = Path(tempfile.mkdtemp(prefix="rqueue-bench-"))
    server = RedisServer().start()
    os.environ["BENCH_REDIS_URL"] = server.url
    client = server.client()
    results: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "mode": "smoke" if args.smoke else "full",
        "params": params.__dict__,
        "machine": machine(),
        "versions": versions(client),
        "systems": {},
        "skipped": dict(skipped),
    }
    log(f"redis-server {results['versions']['redis-server']} at {server.url}; logs in {tmp}")
    try:
        systems: dict[str, System] = {}
        for name in names:
            try:
                systems[name] = load(name)
                results["systems"][name] = {"runs": []}
            except Exception as exc:  # a peer that cannot load is skipped
                results["skipped"][name] = f"import failed: {exc!r}"
                log(f"skipping {name}: {exc!r}")
        run = Run(params, server, tmp)
        for i in range(0 if args.workflows_only else params.runs):
            for name, system in systems.items():
                log(f"run {i + 1}/{params.runs}: {name}")
                started = time.monotonic()
                measured = run.measure(system)
                results["systems"][name]["runs"].append(measured)
                log(f"  {name}: {fmt_run(measured)} ({time.monotonic() - started:.0f} s)")
        if not args.no_workflows:
            results["workflows"] = measure_workflows(run, systems, params)
        if not (args.no_scale or args.workflows_only) and "django-rqueue" in systems:
            log("django-rqueue scale test (enqueue+reserve+ack cost vs backlog)")
            results["scale"] = scale.measure(client, params, log)
        if not (args.no_flow or args.workflows_only) and "django-rqueue" in systems:
            log("django-rqueue flow control (reserve cost with rate limit, group cap, schedules)")
            results["flow"] = flow.measure(client, params, log)
        for system in systems.values():
            system.close()
    finally:
        client.close()
        server.close()
    out = Path(args.output) if args.output else BENCH / f"results-{results['mode']}.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print()
    print(render(results, params.runs))
    print(f"\nresults: {out}")
    shutil.rmtree(tmp, ignore_errors=True)
    failed = [n for n, d in results["systems"].items() for r in d["runs"] if r.get("errors")]
    if failed:
        print(f"phases failed for: {', '.join(sorted(set(failed)))} (see errors in the JSON)")
    # Peers may fail (their problem, reported above); django-rqueue's own side may not.
    rqueue_broken = "django-rqueue" in failed or "django-rqueue" in results["skipped"]
    if "django-rqueue" in names and rqueue_broken:
        return 1
    return 0


def fmt_run(measured: dict[str, Any]) -> str:
    return ", ".join(
        f"{k}={v:,.1f}" for k, v in measured.items() if isinstance(v, float) and "capped" not in k
    )


def render(results: dict[str, Any], runs: int) -> str:
    m, v = results["machine"], results["versions"]
    text = [
        f"{results['date']} · {results['mode']} · {m['nproc']} CPUs ({m['cpu']}) · "
        + ", ".join(f"{k} {val}" for k, val in v.items()),
        "",
        table(results, runs),
        "",
        f"Medians of {runs} run(s) (min–max); * = drain cut after "
        f"{results['params']['drain_cap']:.0f} s, rate from the jobs that ran.",
    ]
    text += ["", ceiling_table(results)]
    if "scale" in results:
        text += ["", scale.table(results["scale"])]
    if "flow" in results:
        text += ["", flow.table(results["flow"])]
    if results.get("workflows"):
        text += ["", workflows.table(results["workflows"], results["params"]["wf_members"])]
    return "\n".join(text)


if __name__ == "__main__":
    sys.exit(main())
