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

import asyncio
import hashlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from django_rqueue import JobContext, Reject, Retry, job, signals
from django_rqueue.contrib.webhooks.jobs import webhook_job
from django_rqueue.exceptions import JobCancelled, JobTimeout
from django_rqueue.job import Job


def write_ledger(ledger: str, tag: str, event: str, **extra: Any) -> None:
    """Append one event line to ``ledger`` (atomic for lines this short)."""
    line = json.dumps({"tag": tag, "event": event, "t": time.time(), "pid": os.getpid(), **extra})
    fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def read_ledger(ledger: str | Path) -> list[dict[str, Any]]:
    """Every event written to ``ledger`` so far, oldest first (``[]`` if none).

    A line still being written is left for the next read: Linux does not make a
    ``read`` atomic against a concurrent ``write`` of a regular file, so a reader
    polling while jobs append can see a line without its newline yet.
    """
    try:
        text = Path(ledger).read_text()
    except FileNotFoundError:
        return []
    complete = text[: text.rfind("\n") + 1]
    return [json.loads(line) for line in complete.splitlines() if line]


def linear_backoff(attempt: int, exception: BaseException) -> float:
    """0.1 s after the first failed attempt, 0.2 s after the second, ..."""
    return 0.1 * attempt


@job
def record(ledger: str, tag: str) -> str:
    """Write one ``run`` event and return ``tag``."""
    write_ledger(ledger, tag, "run")
    return tag


@job(max_attempts=1, sensitive=("password",))
def log_in(ledger: str, user: str, password: str) -> str:
    """Write ``run`` with the password it received; return ``"welcome <user>"`` for the
    password ``"right"``, else raise ``PermissionError`` quoting the password given."""
    write_ledger(ledger, user, "run", password=password)
    if password != "right":
        raise PermissionError(f"wrong password {password!r} for {user}")
    return f"welcome {user}"


@job(expires=600)
def perishable(ledger: str, tag: str) -> str:
    """:func:`record`, but each run expires 10 minutes after its enqueue if not started."""
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


# -- fault-injection jobs (tests/faults/) ----------------------------------------
#
# These write ledger lines that also carry the job's ``id``, ``attempt`` and
# ``token`` (of the reservation running it): ``start`` when the body begins,
# ``end`` when it returns. The receivers below add ``acked`` (the worker's ack
# was accepted by Redis: ``job_succeeded`` is only sent then), ``retrying`` and
# ``failed`` (a failure report accepted by Redis; for attempts the supervisor
# fails on a dead child's behalf, these are written by the master).

#: The job this process is running (set by ``job_started``, which fires in it).
_current: list[Job[Any]] = []
#: Memory a hog job keeps, so that its process stays big after the job.
_hoard: list[bytes] = []


def _remember(sender: object, job: Job[Any], **kwargs: Any) -> None:
    _current[:] = [job]


def _fault_event(event: str) -> Callable[..., None]:
    def receiver(sender: object, job: Job[Any], **kwargs: Any) -> None:
        if job.name.startswith(f"{__name__}.fault_") and job.args:
            write_ledger(
                str(job.args[0]),
                str(job.args[1]) if len(job.args) > 1 else "",
                event,
                id=job.id,
                attempt=job.attempts,
                token=job.token,
            )

    return receiver


_receivers = {
    "acked": _fault_event("acked"),
    "retrying": _fault_event("retrying"),
    "failed": _fault_event("failed"),
}
signals.job_started.connect(_remember, dispatch_uid="tests.fault.current")
# A worker started with RQUEUE_TEST_NO_SUCCESS_RECEIVER=1 has no job_succeeded
# receiver, as most sites: it then reserves short jobs in batches (worker.py).
if os.environ.get("RQUEUE_TEST_NO_SUCCESS_RECEIVER") != "1":
    signals.job_succeeded.connect(_receivers["acked"], dispatch_uid="tests.fault.acked")
signals.job_retrying.connect(_receivers["retrying"], dispatch_uid="tests.fault.retrying")
signals.job_failed.connect(_receivers["failed"], dispatch_uid="tests.fault.failed")


def _outage_event(event: str) -> Callable[..., None]:
    """A ``redis_unavailable``/``redis_recovered`` receiver writing to the ledger named by
    ``RQUEUE_TEST_OUTAGE_LEDGER`` (sent by a worker's master)."""

    def receiver(sender: object, worker_id: str, **kwargs: Any) -> None:
        extra = {"downtime": kwargs["downtime"]} if "downtime" in kwargs else {}
        if "error" in kwargs:
            extra = {"error": str(kwargs["error"]), "since": kwargs["since"].isoformat()}
        write_ledger(os.environ["RQUEUE_TEST_OUTAGE_LEDGER"], worker_id, event, **extra)

    return receiver


if os.environ.get("RQUEUE_TEST_OUTAGE_LEDGER"):
    signals.redis_unavailable.connect(
        _outage_event("redis_unavailable"), dispatch_uid="tests.outage.unavailable", weak=False
    )
    signals.redis_recovered.connect(
        _outage_event("redis_recovered"), dispatch_uid="tests.outage.recovered", weak=False
    )


def _process_event(event: str) -> Callable[..., None]:
    """A ``worker_process_init``/``worker_process_shutdown`` receiver writing to the ledger named
    by ``RQUEUE_TEST_PROCESS_LEDGER`` (tag: the role; ``RQUEUE_TEST_PROCESS_HANG=1``: a child's
    shutdown receiver then sleeps forever, ``RQUEUE_TEST_PROCESS_RAISE=1``: init receivers raise
    after writing)."""

    def receiver(sender: object, role: str, pid: int, **kwargs: Any) -> None:
        extra = {"exitcode": kwargs["exitcode"]} if "exitcode" in kwargs else {}
        write_ledger(
            os.environ["RQUEUE_TEST_PROCESS_LEDGER"],
            str(role),
            event,
            sender=sender,
            sent_pid=pid,
            ppid=os.getppid(),
            **extra,
        )
        if event == "init" and os.environ.get("RQUEUE_TEST_PROCESS_RAISE") == "1":
            raise RuntimeError(f"init receiver fails in {role}")
        if event == "shutdown" and role == "child" and os.environ.get("RQUEUE_TEST_PROCESS_HANG"):
            time.sleep(10**6)

    return receiver


if os.environ.get("RQUEUE_TEST_PROCESS_LEDGER"):
    signals.worker_process_init.connect(
        _process_event("init"), dispatch_uid="tests.process.init", weak=False
    )
    signals.worker_process_shutdown.connect(
        _process_event("shutdown"), dispatch_uid="tests.process.shutdown", weak=False
    )


def _die_after_claim(sender: object, job: Job[Any], **kwargs: Any) -> None:
    """SIGKILL this process: sent right after a poller's claim script enqueued a tick's job."""
    os.kill(os.getpid(), signal.SIGKILL)


# A poller started with RQUEUE_TEST_DIE_AFTER_CLAIM=1 kills itself (SIGKILL) in the middle
# of its round, right after the first tick it claims, before it claims anything else
# (tests/faults/test_schedule.py): a poller only sends job_enqueued for such claims.
if os.environ.get("RQUEUE_TEST_DIE_AFTER_CLAIM") == "1":
    signals.job_enqueued.connect(_die_after_claim, dispatch_uid="tests.fault.die_after_claim")


def fault_mark(ledger: str, tag: str, event: str, **extra: Any) -> None:
    """A ledger line naming the running job's id, attempt and token."""
    job = _current[0] if _current else None
    write_ledger(
        ledger,
        tag,
        event,
        id=job.id if job else "",
        attempt=job.attempts if job else 0,
        token=job.token if job else 0,
        **extra,
    )


@job(max_attempts=5, backoff=linear_backoff)
def fault_noop(ledger: str, tag: str) -> str:
    """``start`` then ``end`` at once."""
    fault_mark(ledger, tag, "start")
    fault_mark(ledger, tag, "end")
    return tag


@job(max_attempts=5, backoff=linear_backoff)
def fault_sleep(ledger: str, tag: str, seconds: float) -> str:
    """``start``, sleep ``seconds``, ``end``."""
    fault_mark(ledger, tag, "start")
    time.sleep(seconds)
    fault_mark(ledger, tag, "end")
    return tag


@job(max_attempts=5, backoff=linear_backoff)
def fault_gate(ledger: str, tag: str, gate: str) -> str:
    """``start``, wait until the file ``gate`` exists (at most 60 s), ``end``."""
    fault_mark(ledger, tag, "start")
    deadline = time.monotonic() + 60
    while not os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.005)
    fault_mark(ledger, tag, "end")
    return tag


@job(max_attempts=5, backoff=linear_backoff)
def fault_sleep_first(ledger: str, tag: str, seconds: float) -> str:
    """Sleep ``seconds`` on the first attempt only (later attempts return at once)."""
    fault_mark(ledger, tag, "start")
    if _current and _current[0].attempts == 1:
        time.sleep(seconds)
    fault_mark(ledger, tag, "end")
    return tag


@job(timeout=1, max_attempts=1)
def fault_spin(ledger: str, tag: str) -> None:
    """A pure-Python busy loop (the soft timeout interrupts it)."""
    fault_mark(ledger, tag, "start")
    while True:
        pass


@job(timeout=1, max_attempts=1)
def fault_sleep_forever(ledger: str, tag: str) -> None:
    """``time.sleep(10**9)``."""
    fault_mark(ledger, tag, "start")
    time.sleep(10**9)


@job(timeout=1, max_attempts=1)
def fault_c_call(ledger: str, tag: str) -> None:
    """A long C call that never checks for signals (so the soft timeout cannot fire)."""
    fault_mark(ledger, tag, "start")
    hashlib.pbkdf2_hmac("sha256", b"x", b"y", 2**31 - 1)  # minutes of C
    fault_mark(ledger, tag, "end")


@job(timeout=1, max_attempts=1)
def fault_swallow_timeout(ledger: str, tag: str) -> None:
    """Catches the soft timeout and carries on, forever."""
    fault_mark(ledger, tag, "start")
    while True:
        try:
            while True:
                time.sleep(0.01)
        except JobTimeout:
            fault_mark(ledger, tag, "soft_timeout")


@job(timeout=1, max_attempts=1)
def fault_spawn(ledger: str, tag: str, hang: bool) -> None:
    """Start ``sleep 600`` (pid in ``spawned``); return, or with ``hang`` outlast timeouts."""
    sleeper = subprocess.Popen(["sleep", "600"])
    fault_mark(ledger, tag, "spawned", child=sleeper.pid)
    while hang:
        try:
            time.sleep(0.01)
        except JobTimeout:
            pass


@job(max_attempts=5, backoff=linear_backoff)
def fault_swallow_cancel(ledger: str, tag: str) -> None:
    """Catches ``JobCancelled`` (writes ``soft_cancel``) and carries on, forever."""
    fault_mark(ledger, tag, "start")
    while True:
        try:
            while True:
                time.sleep(0.01)
        except JobCancelled:
            fault_mark(ledger, tag, "soft_cancel")


@job(max_attempts=3, backoff=linear_backoff)
def fault_suicide(ledger: str, tag: str) -> None:
    """Poison: SIGKILLs its own process on every attempt."""
    fault_mark(ledger, tag, "start")
    os.kill(os.getpid(), signal.SIGKILL)


@job(max_attempts=3)
def fault_hog(ledger: str, tag: str, megabytes: int) -> str:
    """Keep ``megabytes`` MiB (touched) alive in this process after the job returns."""
    fault_mark(ledger, tag, "start")
    _hoard.append(b"x" * (megabytes * 2**20))
    fault_mark(ledger, tag, "end")
    return tag


@job(max_attempts=1)
def fault_die(ledger: str, tag: str, how: str) -> None:
    """End the process mid-job without reporting: ``exit0``, ``exit3`` or ``segfault``."""
    fault_mark(ledger, tag, "start")
    if how == "segfault":
        import ctypes

        ctypes.string_at(0)
    os._exit(3 if how == "exit3" else 0)


@job(takes_context=True, max_attempts=3, backoff=linear_backoff)
def retries_itself(
    context: JobContext, ledger: str, tag: str, times: int, delay: float | None
) -> int:
    """Write ``run`` with the context's attempt; ``raise Retry(delay=delay)`` on the first
    ``times`` attempts, then return the attempt number."""
    write_ledger(
        ledger,
        tag,
        "run",
        attempt=context.attempt,
        attempts=context.job.attempts,
        id=context.job.id,
    )
    if context.attempt <= times:
        raise Retry(delay=delay)
    return context.attempt


@job(max_attempts=3, backoff=linear_backoff)
def rejects(ledger: str, tag: str) -> None:
    """Write ``run`` and ``raise Reject(...)``: no retry although attempts are left."""
    write_ledger(ledger, tag, "run")
    raise Reject(f"bad input {tag}")


# -- async jobs (tests/worker/test_async_runner.py, tests/faults/test_async_jobs.py) ----
#
# Several run at once in one process, so their ledger lines take the job's id,
# attempt and token from their JobContext (``_current`` names one job only).


def context_mark(context: JobContext, ledger: str, tag: str, event: str) -> None:
    """A ledger line naming the job's id, attempt and token, as :func:`fault_mark`."""
    job = context.job
    write_ledger(ledger, tag, event, id=job.id, attempt=job.attempts, token=job.token)


@job(takes_context=True, max_attempts=5, backoff=linear_backoff)
async def fault_async_sleep(context: JobContext, ledger: str, tag: str, seconds: float) -> str:
    """``start``, ``await asyncio.sleep(seconds)``, ``end``."""
    context_mark(context, ledger, tag, "start")
    await asyncio.sleep(seconds)
    context_mark(context, ledger, tag, "end")
    return tag


@job(takes_context=True, max_attempts=5, backoff=linear_backoff)
async def fault_async_gate(context: JobContext, ledger: str, tag: str, gate: str) -> str:
    """``start``, await until the file ``gate`` exists (at most 20 s), ``end``."""
    context_mark(context, ledger, tag, "start")
    deadline = time.monotonic() + 20
    while not os.path.exists(gate) and time.monotonic() < deadline:
        await asyncio.sleep(0.005)
    context_mark(context, ledger, tag, "end")
    return tag


@job(takes_context=True, max_attempts=5, backoff=linear_backoff)
async def fault_async_sleep_first(
    context: JobContext, ledger: str, tag: str, seconds: float
) -> str:
    """Await ``asyncio.sleep(seconds)`` on its first run only (a run handed back unspent
    is attempt 1 again: the ledger tells runs apart)."""
    first = not any(
        e["event"] == "start" and e.get("id") == context.job.id for e in read_ledger(ledger)
    )
    context_mark(context, ledger, tag, "start")
    if first:
        await asyncio.sleep(seconds)
    context_mark(context, ledger, tag, "end")
    return tag


@job(takes_context=True, timeout=0.5, max_attempts=1)
async def fault_async_overrun(context: JobContext, ledger: str, tag: str, seconds: float) -> str:
    """Await ``asyncio.sleep(seconds)`` under a 0.5 s timeout (``end`` only if not cancelled)."""
    context_mark(context, ledger, tag, "start")
    await asyncio.sleep(seconds)
    context_mark(context, ledger, tag, "end")
    return tag


@job(takes_context=True, timeout=1, max_attempts=1)
async def fault_async_block(context: JobContext, ledger: str, tag: str) -> None:
    """Block the event loop (``time.sleep`` in a coroutine): only the hard timeout ends it."""
    context_mark(context, ledger, tag, "start")
    time.sleep(10**9)


@job(takes_context=True, max_attempts=3, backoff=linear_backoff)
async def fault_async_flaky(context: JobContext, ledger: str, tag: str, failures: int) -> int:
    """Raise ``ValueError`` on the first ``failures`` attempts, then return the attempt."""
    context_mark(context, ledger, tag, "start")
    if context.attempt <= failures:
        raise ValueError(f"flaky {tag} attempt {context.attempt}")
    return context.attempt


@job
async def async_record(ledger: str, tag: str) -> str:
    """Write one ``run`` event (with the thread it ran in) and return ``tag``."""
    await asyncio.sleep(0)
    write_ledger(ledger, tag, "run", thread=threading.get_ident())
    return tag


# --- webhooks (tests/contrib/webhooks/) ------------------------------------------------------

#: Retries at once (the tests run each retry with run_now()), four attempts.
quick_deliver = webhook_job(
    name=f"{__name__}.quick_deliver", backoff=lambda attempt, exc: 0, max_attempts=4
)
#: A retry condition on the reply: retry while the receiver says it is busy.
busy_deliver = webhook_job(
    name=f"{__name__}.busy_deliver",
    retry_if=lambda response: response.headers.get("X-Status") == "busy",
)
#: The body length of each reply its retry condition saw (the worker runs in the test process).
sized_replies: list[int] = []


def _record_size(response: httpx.Response) -> bool:
    sized_replies.append(len(response.content))
    return False


#: Records how much of each reply's body a retry condition gets.
sized_deliver = webhook_job(name=f"{__name__}.sized_deliver", retry_if=_record_size)


@job
def gather(results: list[Any], ledger: str) -> list[Any]:
    """A workflow body: writes ``run`` with what its inputs gave and returns it."""
    write_ledger(ledger, "gather", "run", results=results)
    return results


@job(takes_context=True)
def report_headers(context: JobContext, ledger: str, tag: str) -> dict[str, str]:
    """Write ``run`` with the job's headers and the middleware wraps open around it."""
    from tests.jobs_app.middleware import OPEN

    write_ledger(ledger, tag, "run", headers=context.job.headers, open=list(OPEN))
    return context.job.headers


@job(takes_context=True)
async def areport_headers(context: JobContext, ledger: str, tag: str) -> dict[str, str]:
    """:func:`report_headers` as an ``async def`` job."""
    from tests.jobs_app.middleware import OPEN

    await asyncio.sleep(0)
    write_ledger(ledger, tag, "run", headers=context.job.headers, open=list(OPEN))
    return context.job.headers


# Workers import only <app>.jobs: the workflow fault tests' jobs (they use the helpers above).
from tests.jobs_app import progress_jobs, workflow_jobs  # noqa: E402, F401
