"""A creator process that SIGKILLs itself half-way: a staged workflow creation, a ``.delay()``
with ``depends_on``, or a ``retry_failed()``, each cut after a chosen step.

The package has no crash hook: this script drives the steps itself (the staged creation's
:class:`~django_rqueue.workflows.staged.Creation` methods one by one), or wraps a method of
the package in this process only, and kills itself there. Run it with :func:`run_creator`
(``python -m tests.support.interrupted '<json>'``, the test settings, the test's Redis); it
prints the ids it made as one JSON line before it dies, then the test's own pollers finish
or undo what it left. Each grace (the time a creation may stall before the pollers step
in) is lowered to :data:`GRACE_MS` in this process, so its deadlines are short but real.

The JSON argument: ``case`` (``workflow``, ``depends_on``, ``retry``), ``crash`` (the
step after which it dies, or before which for the wrapped methods), ``ledger`` (for the
ledger jobs of ``tests.jobs_app.jobs``), ``force`` (default true:
``RQUEUE["WORKFLOW_FORCE_OUTBOX"]``), and per case ``parent`` (``depends_on``) or
``workflow`` (``retry``: a workflow that ended ``failed``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from tests.support.processes import REPO, command_env

#: Milliseconds of every creation grace in the creator process.
GRACE_MS = 1000
#: The steps of a staged creation (:class:`~django_rqueue.workflows.staged.Creation`).
CREATION_STEPS = ("open", "write_nodes", "link", "commit", "open_gates", "opened")


def run_creator(
    case: str, crash: str, ledger: str, *, env: dict[str, str] | None = None, **extra: Any
) -> dict[str, Any]:
    """Run the creator until it kills itself; return the ids it printed (``env``: more
    environment, e.g. ``RQUEUE_TEST_QUEUE_OPTIONS``; ``extra``: more of the JSON argument).

    Raises:
        AssertionError: it did not die of SIGKILL (its output is in the message).
    """
    argument = json.dumps({"case": case, "crash": crash, "ledger": ledger, **extra})
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.interrupted", argument],
        cwd=REPO,
        env=command_env(extra=env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    report = f"rc {done.returncode}\n{done.stdout}\n{done.stderr}"
    assert done.returncode == -signal.SIGKILL, report
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, report
    ids: dict[str, Any] = json.loads(lines[-1])
    return ids


def _die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _say(ids: dict[str, Any]) -> None:
    print(json.dumps(ids), flush=True)


def _dying_before(owner: Any, name: str) -> None:
    """Make ``owner.name`` kill the process when it is called."""

    def dying(*args: Any, **kwargs: Any) -> Any:
        _die()

    setattr(owner, name, dying)


def _dying_after(owner: Any, name: str) -> None:
    """Make ``owner.name`` kill the process once it has returned."""
    original: Callable[..., Any] = getattr(owner, name)

    def dying(*args: Any, **kwargs: Any) -> Any:
        original(*args, **kwargs)
        _die()

    setattr(owner, name, dying)


def workflow(ledger: str, crash: str) -> None:
    """A chord across two queues (``record`` a on default, b on emails, into ``gather``),
    created staged step by step; dies after the step ``crash``."""
    from django_rqueue.workflows import chord, graph
    from django_rqueue.workflows.staged import Creation
    from tests.jobs_app.jobs import gather, record

    canvas = chord(
        [record.si(ledger, "a"), record.si(ledger, "b").using(queue="emails")], gather.s(ledger)
    )
    plan = graph.compile(canvas)
    assert plan.path == "staged", plan.path
    _say({"workflow": plan.id, "jobs": [*(n.id for n in plan.nodes), plan.finisher.id]})
    creation = Creation(plan)
    for step in CREATION_STEPS:
        getattr(creation, step)()
        if step == crash:
            _die()
    raise AssertionError(f"no step {crash!r}")


def depends_on(ledger: str, crash: str, parent: str) -> None:
    """``record.using(depends_on=[parent]).delay(ledger, "child")``, staged; dies after the
    step ``crash``: ``create`` (the gated job written, nothing linked) or ``link``."""
    from django_rqueue.enqueue.dependent import Dependent
    from tests.jobs_app.jobs import record

    if crash == "create":
        _dying_before(Dependent, "link")
    elif crash == "link":
        _dying_after(Dependent, "link")
    else:
        raise AssertionError(f"no step {crash!r}")
    child = Dependent(record.using(depends_on=[parent]), (ledger, "child"), {})
    _say({"job": child.job_id})
    child()
    raise AssertionError("it did not die")


def retry(workflow_id: str, crash: str) -> None:
    """``retry_failed()`` of ``workflow_id``; dies ``reopen`` (once the record is
    ``reopening``, before any node is re-armed) or ``rearm`` (every node re-armed or
    queued, the record still ``reopening``)."""
    from django_rqueue.engine import workflow_record
    from django_rqueue.workflows import control

    if crash == "reopen":
        _dying_before(control, "_apply")
    elif crash == "rearm":
        _dying_before(workflow_record, "reopened")
    else:
        raise AssertionError(f"no step {crash!r}")
    _say({"workflow": workflow_id})
    control.retry_failed(workflow_id)
    raise AssertionError("it did not die")


def main(argument: str) -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    django.setup()
    from django.conf import settings

    from django_rqueue.enqueue import dependent
    from django_rqueue.workflows import control, staged

    given = json.loads(argument)

    # Every edge through the outbox and every creation staged, on one Redis (unless
    # ``force`` is false: the queues are on two Redis servers, which stages it anyway).
    if given.get("force", True):
        settings.RQUEUE = {**settings.RQUEUE, "WORKFLOW_FORCE_OUTBOX": True}
    staged.CREATE_GRACE_MS = GRACE_MS  # type: ignore[misc]
    dependent.CREATE_GRACE_MS = GRACE_MS  # type: ignore[misc]
    control.REOPEN_GRACE_MS = GRACE_MS  # type: ignore[misc]
    case, crash, ledger = given["case"], given["crash"], given["ledger"]
    if case == "workflow":
        workflow(ledger, crash)
    elif case == "depends_on":
        depends_on(ledger, crash, given["parent"])
    elif case == "retry":
        retry(given["workflow"], crash)
    raise AssertionError(f"no case {case!r}")


if __name__ == "__main__":
    main(sys.argv[1])
