"""A reservation held up past its lease by a partition or a paused worker never runs.

Worker A reaches Redis through a :class:`~.proxy.FaultProxy` and has no
poller. Redis reserves jobs for A, then A is cut off (the proxy holds its
traffic: a partition, not a reset) or frozen (SIGSTOP to its whole process
tree, as a paused VM) for longer than the lease, before it reads the reply.
Meanwhile worker B, reaching Redis directly, re-queues the jobs whose lease
ran out (its poller) and runs them. When A comes back it holds replies that
reserved jobs now run by B under newer fencing tokens: it must run none of
them (their outcome would be discarded, but their body would run twice, maybe
at the same time as B's run).

Every path that reserves is covered:

``pickup``
    A idle worker of one queue sends its reserve behind its ``BLPOP``: Redis
    runs it the moment a job comes, while A is cut off or frozen.
``batch``
    The same reserve taking several jobs at once (short jobs, no
    ``job_succeeded`` receiver): the first runs at once, the rest are held
    and run one after the other.
``async``
    A session of ``async def`` jobs reserves for its free slots; the
    partition begins right after that request reached Redis
    (:meth:`~.proxy.FaultProxy.cut_after`).

Runs are recorded by the job bodies themselves (``start`` and ``end`` lines
in the ledger), so a run counts even when its outcome is discarded.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import pytest
import redis

from django_rqueue.engine.scripts import load
from tests.jobs_app.jobs import fault_async_gate, fault_gate, fault_noop
from tests.support.redis_commands import wait_blocked

from .harness import Faults, WorkerProcess, job_hash, kill_tree, wait_until
from .proxy import FaultProxy

#: How A reserves the jobs (see the module docstring).
type Route = Literal["pickup", "batch", "async"]
ROUTES: tuple[Route, ...] = ("pickup", "batch", "async")

#: Seconds: short, so that a lease runs out within the test.
LEASE = 1.0
#: A worker started with this has no job_succeeded receiver: it reserves short jobs in batches.
NO_RECEIVER = {"RQUEUE_TEST_NO_SUCCESS_RECEIVER": "1"}
#: Jobs A reserves in one go on the batch route.
BATCH = 3


class Stale:
    """The scenario's steps, shared by the partition and the pause."""

    def __init__(
        self,
        faults: Faults,
        proxy: FaultProxy,
        redis_client: redis.Redis,
        tmp_path: Path,
        route: Route,
    ) -> None:
        self.faults, self.proxy, self.redis, self.route = faults, proxy, redis_client, route
        #: The jobs A reserves wait for this file (B's run is still under way when A is back).
        self.gate = tmp_path / "gate"
        #: The async route's first job (A's session runs it while it reserves) waits for this.
        self.first_gate = tmp_path / "first-gate"
        self.first: str | None = None
        # Scripts cached in Redis (as on any Redis that ran jobs before): the held
        # requests are applied, not answered NOSCRIPT.
        for name in ("reserve", "renew", "ack", "ack_reserve", "reclaim"):
            load(name).ensure_loaded(redis_client)
        self.a = faults.worker(
            "--queues",
            "default",
            "--concurrency",
            "1",
            "--async-concurrency",
            "2",
            "--without-poller",
            lease=LEASE,
            redis_url=proxy.url(),
            env=NO_RECEIVER if route == "batch" else None,
        )
        faults.wait_ready(self.a)
        self.ids: list[str] = []
        self.b: WorkerProcess | None = None

    def prepare(self) -> None:
        """Bring A to where its next reservation is the one the route makes."""
        if self.route == "batch":
            warm = fault_noop.delay(self.faults.ledger, "warm")  # batches begin after one job
            wait_until(
                lambda: self.faults.state(warm.id) == "succeeded",
                timeout=10,
                message="A did not run its first job",
            )
        elif self.route == "async":
            # A session runs a first async job, its other slot free: it waits for work.
            first = fault_async_gate.delay(self.faults.ledger, "first", str(self.first_gate))
            self.faults.wait_event("start", tag="first")
            self.first = first.id
        wait_blocked(self.redis, 1)  # A's worker child, idle
        if self.route == "async":
            self.proxy.cut_after(load("reserve").sha.encode())

    def enqueue(self) -> None:
        """Queue the job(s) A reserves, and wait until Redis reserved them for A."""
        ledger, gate = self.faults.ledger, str(self.gate)
        if self.route == "pickup":
            self.ids = [fault_gate.delay(ledger, "j0", gate).id]
        elif self.route == "batch":
            calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
                ((ledger, f"j{i}", gate), {}) for i in range(BATCH)
            ]
            self.ids = [j.id for j in fault_gate.delay_many(calls)]
        else:
            self.ids = [fault_async_gate.delay(ledger, "j0", gate).id]
        wait_until(
            lambda: all(self.faults.state(i) == "running" for i in self.ids),
            timeout=5,
            message="Redis did not reserve the jobs for A",
        )
        holders = {job_hash(self.redis, i)["worker"] for i in self.ids}
        assert all(f":{self.a.pid}:" in w for w in holders), holders  # A's child's worker id
        self.tokens = {i: job_hash(self.redis, i)["token"] for i in self.ids}
        if self.route == "async":
            wait_until(lambda: self.proxy.cut() == 1, timeout=5, message="A's reserve not cut")
            # The session's first job ends (its ack goes on another connection).
            self.first_gate.touch()
            first = self.first
            assert first is not None
            wait_until(
                lambda: self.faults.state(first) == "succeeded",
                timeout=5,
                message="A's first async job did not end",
            )

    def run_elsewhere(self) -> None:
        """Start B (direct): its poller re-queues the jobs once their lease ran out and it
        runs them; wait until it started one (the others wait behind the gate)."""
        self.b = self.faults.worker("--queues", "default", "--concurrency", "1", lease=LEASE)
        wait_until(
            lambda: all(job_hash(self.redis, i)["token"] != self.tokens[i] for i in self.ids),
            timeout=LEASE + 10,  # well under A's 10 s socket timeout
            message="B's poller did not re-queue the jobs whose lease ran out",
        )
        starts = wait_until(
            lambda: [e for e in self.faults.events("start") if e["id"] in self.ids],
            timeout=10,
            message="B did not start a job",
        )
        assert {e["pid"] for e in starts} <= set(self.b.descendants())

    def wait_for_a(self) -> None:
        """Until A, back, has skipped every stale reservation (its log says so), or ran one
        (a ``start`` line from a process not B's: :meth:`finish` reports it)."""
        assert self.b is not None
        b = self.b

        def skipped(job_id: str) -> bool:
            return bool(re.search(rf"{re.escape(job_id)}\b.*skipping it", self.a.stderr()))

        def ran_here() -> bool:
            others = {e["pid"] for e in self.faults.events("start") if e["id"] in self.ids}
            return bool(others - set(b.descendants()))

        wait_until(
            lambda: ran_here() or all(skipped(i) for i in self.ids),
            timeout=10,
            message="A did not skip its stale reservations",
        )

    def finish(self) -> None:
        """Let every run end; assert each job ran exactly once, never two runs at once."""
        self.gate.touch()
        self.faults.wait_final(self.ids, timeout=20)
        if self.route != "batch":
            # The full check wants an "acked" line per job, written by a job_succeeded
            # receiver, which A lacks on the batch route (and A may run a job once it
            # is queued again, as any worker).
            self.faults.check(self.ids)
        assert {self.faults.state(i) for i in self.ids} == {"succeeded"}
        runs = runs_of(self.faults, self.ids)
        assert {i: len(r) for i, r in runs.items()} == dict.fromkeys(self.ids, 1), runs
        assert overlapping(runs) == [], overlapping(runs)
        assert self.a.alive(), self.a.report()


def runs_of(faults: Faults, ids: list[str]) -> dict[str, list[tuple[float, float]]]:
    """Each job's runs as ``(start, end)`` times from its body's ledger lines (a run
    without an ``end`` line, killed, ends at infinity)."""
    runs: dict[str, list[tuple[float, float]]] = {i: [] for i in ids}
    for job_id in ids:
        ends = {(e["pid"], e["token"]): e["t"] for e in faults.events("end", job_id=job_id)}
        for start in faults.events("start", job_id=job_id):
            end = ends.get((start["pid"], start["token"]), float("inf"))
            runs[job_id].append((start["t"], end))
    return runs


def overlapping(runs: dict[str, list[tuple[float, float]]]) -> list[str]:
    """The jobs two of whose runs were under way at the same time."""
    found = []
    for job_id, spans in runs.items():
        spans = sorted(spans)
        if any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:], strict=False)):
            found.append(job_id)
    return found


def scenario(
    faults: Faults, proxy: FaultProxy, redis_client: redis.Redis, tmp_path: Path, route: Route
) -> Stale:
    stale = Stale(faults, proxy, redis_client, tmp_path, route)
    stale.prepare()
    return stale


def during(fault: Callable[[], None], end: Callable[[], None], stale: Stale) -> None:
    """Put ``fault`` in place before the jobs are queued, let B run them, then ``end`` it."""
    if stale.route == "async":  # the cut fires on A's reserve: the fault follows it
        stale.enqueue()
        fault()
    else:
        fault()
        stale.enqueue()
    stale.run_elsewhere()
    end()
    stale.wait_for_a()
    stale.finish()


@pytest.mark.slow
@pytest.mark.parametrize("route", ROUTES)
def test_a_reservation_held_by_a_partition_past_its_lease_never_runs(
    faults: Faults, proxy: FaultProxy, redis_client: redis.Redis, tmp_path: Path, route: Route
) -> None:
    stale = scenario(faults, proxy, redis_client, tmp_path, route)

    def partition() -> None:
        proxy.set_mode("blackhole")  # held both ways, nothing reset

    def heal() -> None:
        proxy.set_mode("pass")
        proxy.heal()

    during(partition, heal, stale)


@pytest.mark.slow
@pytest.mark.parametrize("route", ROUTES)
def test_a_reservation_held_by_a_paused_worker_past_its_lease_never_runs(
    faults: Faults, proxy: FaultProxy, redis_client: redis.Redis, tmp_path: Path, route: Route
) -> None:
    stale = scenario(faults, proxy, redis_client, tmp_path, route)

    def pause() -> None:
        kill_tree(stale.a.pid, signal.SIGSTOP)
        proxy.heal()  # the reply reaches the frozen worker's socket, unread

    def resume() -> None:
        kill_tree(stale.a.pid, signal.SIGCONT)

    try:
        during(pause, resume, stale)
    finally:
        kill_tree(stale.a.pid, signal.SIGCONT)  # never leave a stopped tree behind
