"""Write a workflow in several steps (``staged``): gated nodes behind one commit point.

Used when one ``MULTI`` cannot hold the workflow: nodes on several locations (Cluster
slots, Redis servers), a ``depends_on`` parent on another queue than its dependent, more
than ``ATOMIC_MAX_NODES`` nodes, or ``RQUEUE["WORKFLOW_FORCE_OUTBOX"]``. The steps
(:meth:`Creation.run`), each idempotent:

1. ``wf_record open``: the record, ``creating``, with a roll-back deadline in ``wfopen``;
2. ``wf_nodes gated`` batches per queue: every source waits for its gate (input 0);
3. ``dep_link`` per ``depends_on`` parent (an ended parent's outcome is applied at once);
4. ``wf_record commit``: **the commit point** (``running``, a roll-forward deadline);
5. the gates opened (``dep_apply (source, 0, 'g0:')`` per queue);
6. ``wf_record opened``: the creation leaves ``wfopen``.

Before (4) nothing of the workflow can run (its sources are gated, every other node waits
for them); after (4) all of it will. A creator that stalls is rolled back (before) or
forward (after) by :func:`~.recovery.sweep_opening`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Final, cast

from ..dependencies import GATE_OPEN
from ..engine import commands, dependency_commands, run, workflow_record
from ..engine.commands import Command
from ..engine.connection import get_client
from ..engine.dependency_replies import LinkOutcome, nodes_refused
from ..engine.keys import QueueKeys, queue_of
from ..engine.workflow_record import RecordState
from ..exceptions import JobStateError, WorkflowNotCreated
from .nodes import BATCH_NODES, Link, NodeBatch, WorkflowPlan

logger = logging.getLogger("django_rqueue")

#: Milliseconds a staged creation may take between its steps before the pollers roll it
#: back (not committed) or forward (committed).
CREATE_GRACE_MS: Final = 60_000
#: ``cancel.lua`` wants a TTL > 0 in either mode (``delete`` keeps nothing).
_TTL: Final = 1


class Creation:
    """One staged creation of ``plan``; :meth:`run` may be called again after a failure."""

    def __init__(self, plan: WorkflowPlan) -> None:
        self.plan = plan
        #: The commit point was reached: the workflow will run.
        self.committed = False

    def keys(self, queue: str) -> QueueKeys:
        return QueueKeys.of(self.plan.key_prefix, queue)

    def run(self) -> None:
        """Every step not known to be done.

        Raises:
            RedisUnavailable: Redis cannot be reached (call again).
            WorkflowNotCreated: the pollers rolled the creation back meanwhile.
            JobStateError: a ``depends_on`` parent does not exist (what was written is
                deleted first: nothing of it runs).
        """
        steps = [self.open, self.write_nodes, self.link, self.commit] if not self.committed else []
        for step in [*steps, self.open_gates, self.opened]:
            started = time.monotonic()
            try:
                step()
            except JobStateError:  # a missing depends_on parent: undo it all now
                self.roll_back()
                raise
            took = time.monotonic() - started
            if took * 1000 > CREATE_GRACE_MS / 2:
                logger.warning(
                    "workflow %s: the creation step %s took %.1f s, more than half its grace "
                    "(%d s): the pollers roll back a creation not committed within it",
                    self.plan.id,
                    step.__name__,
                    took,
                    CREATE_GRACE_MS // 1000,
                )

    def open(self) -> None:
        """Step 1: the record, ``creating``."""
        plan = self.plan
        fields = cast("dict[str, str | int]", dict(plan.record))
        command = workflow_record.open_record(
            self.keys(plan.home), plan.id, CREATE_GRACE_MS, fields
        )
        run.execute(get_client(plan.home), command)

    def write_nodes(self) -> None:
        """Step 2: every node, gated (a node written already answers ``exists``)."""
        for batch in self.plan.batches():
            run.execute(get_client(batch.queue), nodes_command(batch))

    def link(self) -> None:
        """Step 3: the edges from ``depends_on`` parents.

        Raises:
            JobStateError: a parent does not exist.
        """
        for link in self.plan.links:
            apply_link(self.plan.key_prefix, link)

    def commit(self) -> None:
        """Step 4, the commit point.

        Raises:
            WorkflowNotCreated: the record was rolled back (``gone``).
        """
        plan = self.plan
        command = workflow_record.commit(self.keys(plan.home), plan.id, CREATE_GRACE_MS)
        reply = run.execute(get_client(plan.home), command)
        if reply.outcome == "gone":  # rolled back by the pollers: remove what this wrote
            nodes = [plan.finisher.id, *(n.id for n in reversed(plan.nodes))]
            delete_jobs(plan.key_prefix, nodes)
            raise WorkflowNotCreated(
                plan.id, False, "its creation took longer than its grace: rolled back"
            )
        if reply.outcome == "state" and reply.state is RecordState.CREATING:
            raise RuntimeError(f"workflow {plan.id}: commit refused while creating")
        self.committed = True  # ok, or a commit sent again (state running or later)

    def roll_back(self) -> None:
        """Undo a creation that was not committed: the record first (a commit then finds
        nothing), then the finisher and the nodes, dependents first."""
        plan = self.plan
        run.execute(get_client(plan.home), workflow_record.abort(self.keys(plan.home), plan.id))
        delete_jobs(plan.key_prefix, [plan.finisher.id, *(n.id for n in reversed(plan.nodes))])

    def open_gates(self) -> None:
        """Step 5: every gated job's gate opened."""
        open_gates(self.plan.key_prefix, [job.id for job in self.plan.gated])

    def opened(self) -> None:
        """Step 6."""
        plan = self.plan
        run.execute(get_client(plan.home), workflow_record.opened(self.keys(plan.home), plan.id))


def nodes_command(batch: NodeBatch) -> Command[object]:
    """One ``wf_nodes.lua`` call of ``batch`` (its reply: the nodes it found there already)."""
    return cast("Command[object]", Command(batch.call, nodes_refused))


def open_gates(key_prefix: str, job_ids: Iterable[str]) -> None:
    """Open the gate (input 0) of each job (``dep_apply.lua`` per queue, in batches):
    each is released if its other inputs have all arrived. Idempotent."""
    by_queue: dict[str, list[str]] = {}
    for job_id in job_ids:
        by_queue.setdefault(queue_of(job_id) or "", []).append(job_id)
    gate = GATE_OPEN.encode()
    for queue, ids in by_queue.items():
        keys = QueueKeys.of(key_prefix, queue)
        client = get_client(queue)
        for start in range(0, len(ids), BATCH_NODES):
            triples = [(i, 0, gate) for i in ids[start : start + BATCH_NODES]]
            run.execute(client, dependency_commands.dep_apply(keys, triples))


def delete_jobs(key_prefix: str, job_ids: Iterable[str]) -> None:
    """Delete each job that is not running (``cancel.lua`` mode ``delete``), in order; a
    job already gone is skipped (and a running one: none can be before a commit)."""
    for job_id in job_ids:
        queue = queue_of(job_id)
        if queue is None:
            continue
        command = commands.cancel(QueueKeys.of(key_prefix, queue), job_id, "delete", _TTL)
        try:
            run.execute(get_client(queue), command)
        except JobStateError:
            pass


def apply_link(key_prefix: str, link: Link) -> None:
    """Link ``link.dependent`` to its parent (``dep_link.lua`` on the parent's queue); a
    parent that had ended on another queue is applied on the dependent's at once.

    Raises:
        JobStateError: the parent does not exist (never did, or its record expired).
    """
    parent_queue = link.parent_queue
    command = dependency_commands.dep_link(
        QueueKeys.of(key_prefix, parent_queue), link.parent, link.entry, same_queue=link.here
    )
    got = run.execute(get_client(parent_queue), command)
    if got.outcome is LinkOutcome.MISSING:
        raise JobStateError(f"job {link.parent} (a dependency) does not exist", None)
    if got.outcome is LinkOutcome.ENDED and got.value is not None:
        queue = link.dependent.partition(":")[0]
        apply = dependency_commands.dep_apply(
            QueueKeys.of(key_prefix, queue), [(link.dependent, link.input_index, got.value)]
        )
        run.execute(get_client(queue), apply)
