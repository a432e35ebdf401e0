"""Ledger jobs of the workflow fault tests (``tests/faults/test_workflows*.py``).

Workers import them through ``tests/jobs_app/jobs.py``, which imports this module at its
end (a worker imports the ``jobs`` module of each installed app, nothing else). Like the
``fault_*`` jobs there, each writes ``start`` and ``end`` ledger lines naming its id,
attempt and token (:func:`~tests.jobs_app.jobs.fault_mark`), and the receivers below add
``acked``, ``retrying`` and ``failed`` when Redis accepted the outcome, so
:meth:`tests.faults.harness.Faults.check` applies to workflow nodes as it does to plain
jobs.

A member returns :func:`run_value` (its tag and the fencing token of the run that
returned it), so what a body received names the very runs whose acks Redis accepted. A
body (:func:`wf_collect`, given its inputs first as ``.s()`` does) writes what it received
in its ``start`` line.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from django_rqueue import job, signals
from django_rqueue.job import Job
from tests.jobs_app.jobs import _current, fault_mark, linear_backoff, write_ledger

#: Seconds a job waits at most for its gate file.
GATE_PATIENCE = 60.0


def run_value(tag: str, token: int) -> str:
    """What a member returns: ``"<tag>@<token>"`` (the token of the run that returned it)."""
    return f"{tag}@{token}"


def tag_of(value: str) -> str:
    """The tag in a :func:`run_value`."""
    return value.rpartition("@")[0]


def _attempt() -> int:
    return _current[0].attempts if _current else 0


def _token() -> int:
    return _current[0].token if _current else 0


def _wait_for(gate: str) -> None:
    deadline = time.monotonic() + GATE_PATIENCE
    while not os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.005)


@job(max_attempts=5, backoff=linear_backoff)
def wf_value(ledger: str, tag: str) -> str:
    """``start``, ``end``, return :func:`run_value`."""
    fault_mark(ledger, tag, "start")
    fault_mark(ledger, tag, "end")
    return run_value(tag, _token())


@job(max_attempts=5, backoff=linear_backoff)
def wf_gate(ledger: str, tag: str, gate: str) -> str:
    """``start``, wait until the file ``gate`` exists (at most 60 s), ``end``, return
    :func:`run_value`."""
    fault_mark(ledger, tag, "start")
    _wait_for(gate)
    fault_mark(ledger, tag, "end")
    return run_value(tag, _token())


@job(max_attempts=5, backoff=linear_backoff)
def wf_gate_first(ledger: str, tag: str, gate: str) -> str:
    """:func:`wf_gate` on the first attempt; later attempts do not wait."""
    fault_mark(ledger, tag, "start")
    if _attempt() == 1:
        _wait_for(gate)
    fault_mark(ledger, tag, "end")
    return run_value(tag, _token())


@job(max_attempts=5, backoff=linear_backoff)
def wf_stuck_after_end(ledger: str, tag: str) -> str:
    """``start``, ``end``; on the first attempt it then sleeps 60 s before it returns (its
    work done, its outcome not yet reported: the moment a kill makes the test's fault),
    later attempts return at once. Returns :func:`run_value`."""
    fault_mark(ledger, tag, "start")
    fault_mark(ledger, tag, "end")
    if _attempt() == 1:
        time.sleep(60)
    return run_value(tag, _token())


@job(max_attempts=5, backoff=linear_backoff)
def wf_collect(received: Any, ledger: str, tag: str) -> str:
    """A workflow body (or any node after the first of a chain): ``start`` with what it
    received in front of its arguments (``received``), ``end``, return :func:`run_value`."""
    fault_mark(ledger, tag, "start", received=received)
    fault_mark(ledger, tag, "end")
    return run_value(tag, _token())


def _outcome_line(event: str) -> Callable[..., None]:
    def receiver(sender: object, job: Job[Any], **kwargs: Any) -> None:
        # ``job.args`` are the stored arguments: a body's inputs are put in front of them
        # only when it is called, so the ledger is the first for every job here.
        if job.name.startswith(f"{__name__}.wf_") and len(job.args) > 1:
            ledger, tag = str(job.args[0]), str(job.args[1])
            write_ledger(ledger, tag, event, id=job.id, attempt=job.attempts, token=job.token)

    return receiver


_receivers = {event: _outcome_line(event) for event in ("acked", "retrying", "failed")}
# As in jobs.py: a worker started with RQUEUE_TEST_NO_SUCCESS_RECEIVER=1 has no job_succeeded
# receiver at all (it then reserves short jobs in batches: tests/faults/test_stale_reservations.py).
if os.environ.get("RQUEUE_TEST_NO_SUCCESS_RECEIVER") != "1":
    signals.job_succeeded.connect(_receivers["acked"], dispatch_uid="tests.wf_fault.acked")
signals.job_retrying.connect(_receivers["retrying"], dispatch_uid="tests.wf_fault.retrying")
signals.job_failed.connect(_receivers["failed"], dispatch_uid="tests.wf_fault.failed")
