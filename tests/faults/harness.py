"""Fault-injection harness: real supervisor subprocesses, real Redis, an out-of-Redis ledger.

API (the ``faults`` fixture in ``tests/faults/conftest.py`` yields a :class:`Faults`)::

    def test_x(faults: Faults) -> None:
        w = faults.worker("--concurrency", "1", lease=1, grace=1)  # rqueue_work subprocess
        faults.wait_ready(w)                      # its children are up and blocked on Redis
        j = fault_sleep.delay(faults.ledger, "a", 30)      # jobs from tests/jobs_app/jobs.py
        start = faults.wait_event("start", tag="a")         # a ledger dict (id/attempt/token/pid)
        os.killpg(w.pid, signal.SIGKILL)                    # or w.signal(sig), w.children() ...
        faults.wait_final([j.id], timeout=10)               # every id succeeded or failed
        report = faults.check([j.id])                       # raises AssertionError on a violation
        assert report.starts[j.id] == 2

Pieces:

- ``WorkerProcess`` (``faults.worker(*args, lease=, grace=, env=, redis_url=)``), the
  name these tests give :class:`tests.support.processes.CommandProcess`:
  ``python -m django rqueue_work <args>`` in its own session (``start_new_session``),
  output to files, with ``RQUEUE_TEST_LEASE`` / ``RQUEUE_TEST_TIMEOUT_GRACE`` read by
  ``tests/settings.py``. ``faults.command(name, *args)`` starts any other command
  (``rqueue_poller``, ``rqueue_restart``) the same way. ``.pid`` (the master),
  ``.children()`` (direct child pids, from ``/proc/<pid>/task/*/children``),
  ``.descendants()``, ``.signal(sig)`` (master only), ``.killpg(sig)`` (the master's
  process group; children have their own groups, so use :func:`kill_tree` for all),
  ``.wait(timeout)``, ``.alive()``, ``.stderr()``, ``.report()``. Every process is
  SIGKILLed (whole tree) at teardown and its output printed (pytest shows it on failure).
- Ledger: ``faults.ledger`` is a JSON-lines file written by the ``fault_*`` jobs of
  ``tests/jobs_app/jobs.py`` with one ``O_APPEND`` write per line: ``start``/``end``
  from the job body, ``acked`` when Redis accepted the ack (``job_succeeded``),
  ``retrying``/``failed`` when Redis accepted a failure report (written by the
  master for attempts it fails for a dead child). Each line has ``tag``, ``event``,
  ``t``, ``pid``, ``id``, ``attempt``, ``token``. ``faults.events(event=None,
  tag=None, job_id=None)`` reads it; ``faults.wait_event(...)`` waits for a line.
- :meth:`Faults.check` is the invariant checker (read-only, after the fact): every
  id is terminal in Redis (``succeeded``, or ``failed`` and in the failed zset), in no
  queue/reserved/delayed structure; a succeeded job has exactly one ``acked`` line
  whose token is the job's final token (the ack of the live token holder), a failed
  one none; no ``acked`` line names a token other than the final one. It returns a
  :class:`Report` (``starts``, ``duplicates``, ``states``, ``errors``) for
  scenario-specific assertions (e.g. ``report.duplicates == {}``).
- Workflows: :meth:`Faults.wait_workflows` and :meth:`Faults.check_workflows` (the
  invariants of workflows of the ``wf_*`` jobs of ``tests/jobs_app/workflow_jobs.py``:
  every body released once with its full input list, nothing lost, nothing left
  waiting; :mod:`tests.faults.workflow_check`).
- Helpers: :func:`job_hash`, and :func:`children_of`, :func:`descendants_of`,
  :func:`alive`, :func:`kill_tree` and ``wait_until`` (re-exported from ``tests.support``).

Timescales: pass ``lease=`` (seconds, e.g. 1) and ``grace=`` to ``faults.worker``;
the test process keeps ``LEASE`` 2 but only enqueues and reads. Never ``sleep``: wait
on a condition with a deadline.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from django_rqueue.conf import get_config
from django_rqueue.engine.keys import QueueKeys, queue_of
from django_rqueue.workflows import WorkflowState
from tests.jobs_app.jobs import read_ledger
from tests.support.processes import (
    STARTUP,
    Processes,
    alive,
    children_of,
    command_env,
    descendants_of,
    kill_tree,
)
from tests.support.processes import CommandProcess as WorkerProcess
from tests.support.waiting import wait_until

from . import workflow_check
from .workflow_check import WorkflowReport

__all__ = [
    "STARTUP",
    "Faults",
    "Report",
    "WorkerProcess",
    "WorkflowReport",
    "alive",
    "children_of",
    "descendants_of",
    "job_hash",
    "kill_tree",
    "wait_until",
]


# -- Redis ---------------------------------------------------------------------


def _text(value: Any) -> str:  # a Redis reply
    return value.decode() if isinstance(value, bytes) else str(value)


def job_hash(client: redis.Redis, job_id: str, queue: str = "default") -> dict[str, str]:
    """The job's hash, decoded (``{}`` if it does not exist)."""
    k = QueueKeys.of(get_config().key_prefix, queue)
    return {_text(a): _text(b) for a, b in client.hgetall(k.job(job_id)).items()}


def _queue_of(job_id: str) -> str:
    return queue_of(job_id) or get_config().default_queue


# -- the harness ---------------------------------------------------------------


@dataclass
class Report:
    """What :meth:`Faults.check` found (it already asserted the invariants)."""

    #: Final state per id.
    states: dict[str, str]
    #: ``start`` lines per id (executions, including killed and discarded ones).
    starts: Counter[str]
    #: Ids started more than once, with their start count.
    duplicates: dict[str, int]
    #: Final job hashes per id.
    jobs: dict[str, dict[str, str]] = field(default_factory=dict)

    def errors(self, job_id: str) -> list[dict[str, Any]]:
        """The job's error history (one dict per failed attempt), oldest first."""
        fields = self.jobs[job_id]
        n = int(fields.get("nerr", 0))
        return [json.loads(fields[f"err:{i}"]) for i in range(1, n + 1) if f"err:{i}" in fields]


class Faults:
    """Processes, ledger and checks for one fault-injection test (see the module docstring)."""

    @classmethod
    @contextmanager
    def session(cls, tmp_path: Path, client: redis.Redis, redis_url: str) -> Iterator[Faults]:
        """A harness for one test: its processes killed and their output printed at the end
        (pytest shows it when the test fails)."""
        harness = cls(tmp_path, client, redis_url)
        try:
            yield harness
        finally:
            harness.stop_all()
            for process in harness.started:
                print(process.report())

    def __init__(self, tmp_path: Path, client: redis.Redis, redis_url: str) -> None:
        self.tmp_path = tmp_path
        self.client = client
        self.redis_url = redis_url
        self.ledger = str(tmp_path / "ledger.jsonl")
        self.processes = Processes(tmp_path / "procs")

    @property
    def started(self) -> list[WorkerProcess]:
        """Every process :meth:`command` and :meth:`worker` started, in order."""
        return self.processes.started

    # -- processes -----------------------------------------------------------

    def env(
        self,
        *,
        lease: float | None = None,
        grace: float | None = None,
        redis_url: str | None = None,
        extra: dict[str, str] | None = None,
    ) -> dict[str, str]:
        env = command_env(redis_url=redis_url or self.redis_url)
        if lease is not None:
            env["RQUEUE_TEST_LEASE"] = str(lease)
        if grace is not None:
            env["RQUEUE_TEST_TIMEOUT_GRACE"] = str(grace)
        env.update(extra or {})
        return env

    def command(
        self,
        name: str,
        *args: str,
        lease: float | None = None,
        grace: float | None = None,
        redis_url: str | None = None,
        env: dict[str, str] | None = None,
    ) -> WorkerProcess:
        """Start ``python -m django <name> <args>`` (killed with its tree at teardown)."""
        return self.processes.start(
            name, *args, env=self.env(lease=lease, grace=grace, redis_url=redis_url, extra=env)
        )

    def worker(
        self,
        *args: str,
        lease: float | None = None,
        grace: float | None = None,
        redis_url: str | None = None,
        env: dict[str, str] | None = None,
    ) -> WorkerProcess:
        """Start ``rqueue_work <args>`` (add ``--queues``, ``--concurrency`` ... yourself)."""
        return self.command(
            "rqueue_work", *args, lease=lease, grace=grace, redis_url=redis_url, env=env
        )

    def wait_ready(self, worker: WorkerProcess, children: int | None = None) -> list[int]:
        """Until ``children`` worker children (default: ``--concurrency``, else 2) logged
        ``serving`` and the master has forked them all, its poller child too (unless
        ``--without-poller``); returns the master's child pids (poller child included)."""
        argv = worker.argv
        if children is None:
            children = int(argv[argv.index("--concurrency") + 1]) if "--concurrency" in argv else 2
        forked = children + (0 if "--without-poller" in argv else 1)

        def ready() -> bool:
            if not worker.alive():
                return True
            serving = len(re.findall(r"/\d+: serving ", worker.stderr()))
            return serving >= children and len(worker.children()) >= forked

        wait_until(ready, timeout=STARTUP, interval=0.05, message="worker did not start")
        assert worker.alive(), worker.report()
        return worker.children()

    def stop_all(self) -> None:
        self.processes.kill_all()

    # -- ledger --------------------------------------------------------------

    def events(
        self, event: str | None = None, tag: str | None = None, job_id: str | None = None
    ) -> list[dict[str, Any]]:
        return [
            e
            for e in read_ledger(self.ledger)
            if (event is None or e["event"] == event)
            and (tag is None or e["tag"] == tag)
            and (job_id is None or e.get("id") == job_id)
        ]

    def wait_event(
        self,
        event: str,
        *,
        tag: str | None = None,
        job_id: str | None = None,
        count: int = 1,
        timeout: float = 10.0,
    ) -> dict[str, Any]:
        """Until the ledger has ``count`` matching lines; returns the ``count``-th."""
        found = wait_until(
            lambda: (lines := self.events(event, tag, job_id))[count - 1 :] and lines,
            timeout=timeout,
            interval=0.02,
            message=f"no {count}x {event!r} (tag={tag}, id={job_id}) in the ledger",
        )
        return found[count - 1]

    # -- Redis ---------------------------------------------------------------

    def state(self, job_id: str) -> str:
        return job_hash(self.client, job_id, _queue_of(job_id)).get("s", "")

    def wait_final(self, ids: list[str], timeout: float = 30.0) -> None:
        """Until every id is ``succeeded`` or ``failed`` in Redis (pipelined polling)
        and the ledger has the ``acked`` line of every succeeded one (up to 5 s more)."""
        pending = list(ids)

        def done() -> bool:
            nonlocal pending
            prefix = get_config().key_prefix
            try:
                pipe = self.client.pipeline(transaction=False)
                for job_id in pending:
                    pipe.hget(QueueKeys.of(prefix, _queue_of(job_id)).job(job_id), "s")
                states = pipe.execute()
            except redis.ConnectionError:
                return False
            pending = [
                i
                for i, s in zip(pending, states, strict=True)
                if _text(s or b"") not in ("succeeded", "failed")
            ]
            return not pending

        wait_until(
            done,
            timeout=timeout,
            interval=0.1,
            message=f"jobs not final: {len(pending)} left, e.g. {pending[:3]}",
        )
        # A worker writes its ``acked`` line just *after* Redis accepted the ack,
        # so the ledger may trail Redis by a moment: wait (bounded) until every
        # succeeded id has one (check() names any that never get one).
        prefix = get_config().key_prefix
        pipe = self.client.pipeline(transaction=False)
        for job_id in ids:
            pipe.hget(QueueKeys.of(prefix, _queue_of(job_id)).job(job_id), "s")
        succeeded = {
            i for i, s in zip(ids, pipe.execute(), strict=True) if _text(s or b"") == "succeeded"
        }

        def ledger_caught_up() -> bool:
            return succeeded <= {e.get("id") for e in self.events("acked")}

        try:
            wait_until(ledger_caught_up, timeout=5, interval=0.02)
        except AssertionError:
            pass  # check() names the ids without an accepted ack

    def check(self, ids: list[str]) -> Report:
        """Assert zero lost jobs and exactly-once completion by the live token holder."""
        prefix = get_config().key_prefix
        by_queue: dict[str, list[str]] = {}
        for job_id in ids:
            by_queue.setdefault(_queue_of(job_id), []).append(job_id)
        problems: list[str] = []
        states: dict[str, str] = {}
        jobs: dict[str, dict[str, str]] = {}
        for queue, qids in by_queue.items():
            k = QueueKeys.of(prefix, queue)
            reserved = {_text(i) for i in self.client.zrange(k.reserved, 0, -1)}
            delayed = {_text(i) for i in self.client.zrange(k.delayed, 0, -1)}
            failed = {_text(i) for i in self.client.zrange(k.failed, 0, -1)}
            pipe = self.client.pipeline(transaction=False)
            for job_id in qids:
                pipe.hgetall(k.job(job_id))
            for job_id, raw in zip(qids, pipe.execute(), strict=True):
                fields = {_text(a): _text(b) for a, b in raw.items()}
                jobs[job_id] = fields
                state = fields.get("s", "")
                states[job_id] = state
                if not fields:
                    problems.append(f"{job_id}: LOST (no job hash)")
                elif state not in ("succeeded", "failed"):
                    problems.append(f"{job_id}: not final (state {state!r})")
                if job_id in reserved or job_id in delayed:
                    problems.append(f"{job_id}: still in reserved/delayed ({state})")
                if (state == "failed") != (job_id in failed):
                    in_failed = job_id in failed
                    problems.append(f"{job_id}: state {state!r}, in failed zset: {in_failed}")
        wanted = set(ids)
        events = [e for e in read_ledger(self.ledger) if e.get("id") in wanted]
        acked: dict[str, list[dict[str, Any]]] = {}
        starts: Counter[str] = Counter()
        for e in events:
            if e["event"] == "acked":
                acked.setdefault(e["id"], []).append(e)
            elif e["event"] == "start":
                starts[e["id"]] += 1
        for job_id in ids:
            acks = acked.get(job_id, [])
            token = jobs[job_id].get("token")
            if states[job_id] == "succeeded":
                if len(acks) != 1:
                    problems.append(f"{job_id}: succeeded with {len(acks)} accepted acks")
                elif str(acks[0]["token"]) != token:
                    problems.append(
                        f"{job_id}: ack accepted for token {acks[0]['token']}, final token {token}"
                    )
                if starts[job_id] == 0:
                    problems.append(f"{job_id}: succeeded but never started (ledger)")
            elif acks:
                problems.append(f"{job_id}: {states[job_id]!r} but {len(acks)} accepted ack(s)")
        if problems:
            raise AssertionError(
                f"{len(problems)} invariant violation(s) over {len(ids)} job(s):\n"
                + "\n".join(problems[:50])
            )
        duplicates = {i: n for i, n in starts.items() if n > 1}
        return Report(states=states, starts=starts, duplicates=duplicates, jobs=jobs)

    def wait_and_check(self, ids: list[str], timeout: float = 30.0) -> Report:
        """:meth:`wait_final`, then :meth:`check`."""
        self.wait_final(ids, timeout)
        return self.check(ids)

    # -- workflows -----------------------------------------------------------

    def wait_workflows(self, ids: list[str], timeout: float = 30.0) -> None:
        """Until every workflow of ``ids`` has ended, and :meth:`wait_final` of their nodes."""
        workflow_check.wait_workflows(self, ids, timeout)

    def check_workflows(
        self, ids: list[str], state: WorkflowState = WorkflowState.SUCCEEDED
    ) -> WorkflowReport:
        """Assert the workflow invariants (:mod:`tests.faults.workflow_check`) for ``ids``,
        each expected to end ``state``; :meth:`check` included for every node."""
        return workflow_check.check_workflows(self, ids, state)


def elapsed_since(t: float) -> float:
    """Seconds since the ledger time ``t`` (``time.time()`` based)."""
    return time.time() - t
