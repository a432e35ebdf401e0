"""Jobs used by the test suite.

Workers find this module by autodiscovery (``tests.jobs_app`` is installed in
``tests.settings``), so the same jobs run in-process and in worker
subprocesses. Every job writes to a *ledger*: a JSON-lines file outside
Redis whose path is the job's first argument. One line per event, written
with a single ``O_APPEND`` write, holding ``tag``, ``event``, ``t``
(``time.time()``) and ``pid``. Tests read it back with :func:`read_ledger`,
so what a job did is checked independently of what Redis says about it.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from django_rqueue import job


def write_ledger(ledger: str, tag: str, event: str, **extra: Any) -> None:
    """Append one event line to ``ledger`` (atomic for lines this short)."""
    line = json.dumps({"tag": tag, "event": event, "t": time.time(), "pid": os.getpid(), **extra})
    fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def read_ledger(ledger: str | Path) -> list[dict[str, Any]]:
    """Every event written to ``ledger`` so far, oldest first (``[]`` if none)."""
    try:
        text = Path(ledger).read_text()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines() if line]


def linear_backoff(attempt: int, exception: BaseException) -> float:
    """0.1 s after the first failed attempt, 0.2 s after the second, ..."""
    return 0.1 * attempt


@job
def record(ledger: str, tag: str) -> str:
    """Write one ``run`` event and return ``tag``."""
    write_ledger(ledger, tag, "run")
    return tag


@job
def slow(ledger: str, tag: str, seconds: float) -> str:
    """Write ``start``, sleep ``seconds``, write ``end``."""
    write_ledger(ledger, tag, "start")
    time.sleep(seconds)
    write_ledger(ledger, tag, "end")
    return tag


@job(max_attempts=3, backoff=linear_backoff)
def fail_always(ledger: str, tag: str) -> None:
    """Write ``run`` and raise ``RuntimeError`` on every attempt."""
    write_ledger(ledger, tag, "run")
    raise RuntimeError(f"boom {tag}")


@job(max_attempts=3, backoff=linear_backoff)
def fail_then_succeed(ledger: str, tag: str, failures: int) -> int:
    """Raise ``ValueError`` on the first ``failures`` runs, then return the run number."""
    runs = sum(1 for e in read_ledger(ledger) if e["tag"] == tag) + 1
    write_ledger(ledger, tag, "run", run=runs)
    if runs <= failures:
        raise ValueError(f"flaky {tag} run {runs}")
    return runs


@job(max_attempts=1)
def returns_unserializable(ledger: str, tag: str) -> object:
    """Return a value JSON cannot carry."""
    write_ledger(ledger, tag, "run")
    return object()


@job(timeout=0.5, max_attempts=1)
def sleepy_timeout(ledger: str, tag: str, seconds: float) -> None:
    """Sleep ``seconds`` under a 0.5 s timeout; ``end`` is written only if not interrupted."""
    write_ledger(ledger, tag, "start")
    time.sleep(seconds)
    write_ledger(ledger, tag, "end")


@job(max_attempts=3, backoff=lambda attempt, exception: 30.0)
def fail_with_long_backoff(ledger: str, tag: str) -> None:
    """Always fails; a worker would wait 30 s between attempts (EAGER must not)."""
    write_ledger(ledger, tag, "run")
    raise RuntimeError(f"boom {tag}")


@job(max_attempts=1)
def exits(ledger: str, tag: str) -> None:
    """Raise ``SystemExit`` from inside the job: the attempt fails, the worker lives."""
    write_ledger(ledger, tag, "run")
    raise SystemExit(3)


@job
def chain(ledger: str, tag: str, queue: str, next_tag: str) -> str:
    """Write ``run``, then enqueue ``record(ledger, next_tag)`` on ``queue``."""
    write_ledger(ledger, tag, "run")
    record.using(queue=queue).delay(ledger, next_tag)
    return tag
