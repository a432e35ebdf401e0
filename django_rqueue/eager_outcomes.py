"""EAGER's memory of the jobs it ran, and the inputs a job that depends on them gets from it.

Under ``RQUEUE["EAGER"]`` nothing is written to Redis, so a job enqueued with
``using(depends_on=[...])`` (or a workflow node with such a parent) cannot find its
parents there. :func:`~django_rqueue.execution.run_eager` therefore records the outcome of
every job it ends in this process (:func:`remember`), as the arrival value a live parent
would deliver (:class:`~django_rqueue.dependencies.Arrival`), keeping the last
:data:`KEPT` of them. :func:`give_inputs` gives a dependent its parents' arrivals and
decides, as ``include/node_decide.lua`` does, whether it runs or ends ``cancelled``
(``dependency_failed``). A parent this process did not run (or forgot) is unknown: the
error live raises for a parent that does not exist. Touches no Redis.
"""

from __future__ import annotations

import collections
import datetime
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Final

from .dependencies import CANCELLED, FAILED, SUCCEEDED, Arrival
from .exceptions import JobStateError
from .inputs import Inputs, OnFailure
from .job import CancelReason, Job, JobStatus
from .serialization import dumps

#: Outcomes kept (the oldest is forgotten first): enough for any test's jobs, bounded for a
#: long process that runs EAGER (a development server).
KEPT: Final = 1_000

_outcomes: collections.OrderedDict[str, Arrival] = collections.OrderedDict()
_lock = threading.Lock()


def arrival_of(job: Job[Any]) -> Arrival | None:
    """The arrival value ``job``'s end delivers to a dependent (``None``: not ended).

    Succeeded: its result as JSON; failed: its last error record as JSON and its name;
    cancelled: its cancel reason (``""`` for ``cancel()``) and its name. The token is the
    number of attempts made.
    """
    token = max(job.attempts, 0)
    if job.status is JobStatus.SUCCEEDED:
        return Arrival(SUCCEEDED, token, dumps(job.result))
    if job.status is JobStatus.FAILED:
        return Arrival(FAILED, token, dumps(job.error) if job.error else "", name=job.name)
    if job.status is JobStatus.CANCELLED:
        reason = job.cancel_reason.value if job.cancel_reason is not None else ""
        return Arrival(CANCELLED, token, name=job.name, reason=reason)
    return None


def remember(job: Job[Any]) -> None:
    """Record how ``job`` ended (nothing when it has not), forgetting the oldest outcome
    beyond :data:`KEPT`."""
    arrival = arrival_of(job)
    if arrival is None:
        return
    with _lock:
        _outcomes[job.id] = arrival
        _outcomes.move_to_end(job.id)
        while len(_outcomes) > KEPT:
            _outcomes.popitem(last=False)


def outcome(job_id: str) -> Arrival | None:
    """How the job ``job_id`` ended when EAGER ran it in this process (``None``: unknown)."""
    with _lock:
        return _outcomes.get(job_id)


def outcomes(parents: Sequence[str]) -> dict[str, Arrival]:
    """Each parent's recorded arrival.

    Raises:
        JobStateError: a parent is unknown (``depends_on: job <id> does not exist``, as a
            live ``.delay()`` says of a parent that does not exist).
    """
    found: dict[str, Arrival] = {}
    for parent in parents:
        arrival = outcome(parent)
        if arrival is None:
            raise JobStateError(f"depends_on: job {parent} does not exist", None)
        found[parent] = arrival
    return found


def give_inputs(
    job: Job[Any],
    input_ids: Sequence[str],
    arrivals: Mapping[str, Arrival],
    on_failure: OnFailure,
    pass_shape: str | None,
) -> bool:
    """Set ``job.inputs`` from ``arrivals`` (by input id, every one of ``input_ids`` ended)
    and decide as ``include/node_decide.lua``: ``True`` when it runs; ``False`` when
    ``on_failure`` is ``"cancel"`` and an input did not succeed: then ``job`` has ended
    ``cancelled`` with :attr:`CancelReason.DEPENDENCY_FAILED` (and is remembered).

    ``pass_shape``: the field ``dr`` (``None``: nothing is prepended); with no input it
    still applies (``"[]"``: the body of a chord with no header gets ``[]``).
    """
    by_index = {k: arrivals[i] for k, i in enumerate(input_ids, start=1)}
    job.inputs = Inputs(
        ids=tuple(input_ids),
        count=len(input_ids),
        missing=0,
        failed=sum(a.kind == FAILED for a in by_index.values()),
        cancelled=sum(a.kind == CANCELLED for a in by_index.values()),
        on_failure=on_failure,
        pass_shape=pass_shape,
        arrivals=by_index,
    )
    if on_failure == "cancel" and job.inputs.failed + job.inputs.cancelled > 0:
        job.status = JobStatus.CANCELLED
        job.cancel_reason = CancelReason.DEPENDENCY_FAILED
        job.finished_at = datetime.datetime.now(datetime.UTC)
        remember(job)
        return False
    return True
