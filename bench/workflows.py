"""Workflows side by side: a chord of N members and its body, against N plain jobs.

For every system whose adapter has ``has_workflows`` (django-rqueue's chord, Celery's
``chord`` on its Redis result backend, RQ's ``depends_on`` with a list of jobs), on a
flushed Redis, with the workers stopped while the jobs are written:

- **create**: the time to write the chord (N members and the body that waits for them)
  against the time to bulk-enqueue N + 1 plain jobs (``enqueue_bulk``), as jobs/s;
- **complete**: two worker processes are started; the time from the first member's run
  to the body's, against the time from the first to the last of N + 1 plain jobs (the
  plain jobs measured the same way, right before; the workers' start-up is left out of
  both). The ratio is what the composition costs on top of running the same jobs.

Members and plain jobs record one line each when they run (bench/record.py), as every
bench job does; the body records one line with ``due = -1`` (:data:`BODY`), and its
result, ``1`` per member, is what the body receives. A run still going after ``cap`` seconds is cut
and reported as such: RQ checks every dependency of the body at each member's end, so
its chord grows with N².
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable
from typing import Any

from bench import record
from bench.systems import System

#: The shapes' table columns: (title, result keys, digits).
COLUMNS = [
    ("chord create (nodes/s)", ["chord_create"], 0),
    ("bulk enqueue of as many plain jobs (jobs/s)", ["plain_create"], 0),
    ("chord complete, 2 procs (s)", ["chord_complete"], 2),
    ("as many plain jobs, 2 procs (s)", ["plain_complete"], 2),
    ("chord / plain", ["complete_ratio"], 2),
    ("body runs", ["chord_bodies"], 0),
]

#: The ``due`` the body records, to tell its line from the members'.
BODY = -1.0

Workers = Callable[[System, int], contextlib.AbstractContextManager[None]]


def measure(
    system: System,
    members: int,
    cap: float,
    flush: Callable[[], None],
    workers: Workers,
    out: Callable[[str], str],
) -> dict[str, Any]:
    """One run of both shapes on ``system`` (``workers(system, processes)`` starts its
    worker processes; ``out(label)`` names a fresh record file; ``flush()`` empties Redis)."""
    result: dict[str, Any] = {}
    # Plain jobs first: N + 1 of them, as many as the chord's nodes.
    plain = out("wf-plain")
    flush()
    started = time.perf_counter()
    system.enqueue_bulk(members + 1, plain)
    result["plain_create"] = (members + 1) / (time.perf_counter() - started)
    with workers(system, 2):
        got = _wait(plain, members + 1, cap)
    ran = sorted(r[2] for r in record.read(plain))
    result["plain_complete"] = ran[-1] - ran[0] if ran else cap
    result["plain_complete_capped"] = got < members + 1

    chord = out("wf-chord")
    flush()
    started = time.perf_counter()
    system.enqueue_chord(members, chord)
    result["chord_create"] = (members + 1) / (time.perf_counter() - started)
    with workers(system, 2):
        got = _wait(chord, members + 1, cap)
    rows = record.read(chord)
    bodies = [ran for _, due, ran in rows if due == BODY]
    first = min((ran for _, due, ran in rows if due != BODY), default=None)
    if got < members + 1 or not bodies or first is None:
        result["chord_complete"] = cap
        result["chord_complete_capped"] = True
    else:
        result["chord_complete"] = bodies[0] - first
        result["chord_bodies"] = len(bodies)  # 1: a body that runs twice is a bug
    result["complete_ratio"] = result["chord_complete"] / result["plain_complete"]
    return result


def _wait(out: str, n: int, cap: float) -> int:
    deadline = time.monotonic() + cap
    got = record.count(out)
    while got < n and time.monotonic() < deadline:
        time.sleep(0.01)
        got = record.count(out)
    return got


def table(results: dict[str, Any], members: int) -> str:
    """The side-by-side table: medians over the runs (min–max), ``*`` for a cut run."""
    head = ["system", *(title for title, _, _ in COLUMNS)]
    lines = [
        f"Workflows: a chord of {members:,} members and its body against {members + 1:,} "
        "plain jobs (bench/workflows.py).",
        "",
        "| " + " | ".join(head) + " |",
        "| --- " * len(head) + "|",
    ]
    for name, runs in results.items():
        cells = []
        for _, keys, digits in COLUMNS:
            values = [r[k] for r in runs for k in keys if k in r]
            if not values:
                cells.append("—")
                continue
            med = statistics.median(values)
            text = f"{med:,.{digits}f}"
            if len(values) > 1:
                text += f" ({min(values):,.{digits}f}–{max(values):,.{digits}f})"
            if any(r.get(f"{k}_capped") for r in runs for k in keys):
                text += "*"
            cells.append(text)
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
