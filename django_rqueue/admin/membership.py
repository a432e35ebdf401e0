"""What a job's page shows of the jobs it is linked to: its workflow (a link to the
workflow's page), its inputs with their states and arrivals, and its dependents.

Bounded: at most :data:`SHOWN` inputs and :data:`SHOWN` dependents are listed (the rest
counted), their states read with one small ``HMGET`` each
(:func:`~django_rqueue.ops.workflow_listings.job_states`), pipelined per queue.
"""

from __future__ import annotations

from typing import Any, Final

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from ..dependencies import CANCELLED, FAILED, GATE, SUCCEEDED, TOMBSTONE
from ..engine.keys import finisher_id
from ..job import Job
from ..ops import workflow_listings as wl
from .common import RqueueAdmin, job_url, workflow_url

#: Most inputs, and most dependents, a job's page lists.
SHOWN: Final = 100

#: How an arrival reads on the page, by its kind.
ARRIVALS: Final = {
    SUCCEEDED: gettext_lazy("arrived: succeeded"),
    FAILED: gettext_lazy("arrived: failed"),
    CANCELLED: gettext_lazy("arrived: cancelled"),
    GATE: gettext_lazy("gate open"),
    TOMBSTONE: gettext_lazy("not arrived (runs again)"),
}


def links(model_admin: RqueueAdmin, job: Job[Any]) -> dict[str, Any] | None:
    """The context of the job page's "Workflow and dependencies" part (``None``: the job
    has no workflow, no inputs and no dependents).

    Raises:
        RedisUnavailable: Redis cannot be reached.
    """
    if job.workflow_id is None and job.inputs is None and job.dependents is None:
        return None
    input_ids = list(job.inputs.ids[:SHOWN]) if job.inputs else []
    edges = list(job.dependents.edges[:SHOWN]) if job.dependents else []
    states = wl.job_states([*input_ids, *(e.dependent for e in edges)])
    workflow = None
    if job.workflow_id:
        role = _("a node of")
        if job.id == finisher_id(job.workflow_id):
            role = _("the finisher of")
        elif job.id.partition(":")[2].startswith(job.workflow_id.partition(":")[2] + "."):
            role = _("a callback of")
        workflow = {
            "id": job.workflow_id,
            "url": workflow_url(model_admin, job.workflow_id),
            "role": role,
        }
    inputs = []
    for k, input_id in enumerate(input_ids, start=1):
        arrival = job.inputs.arrivals.get(k) if job.inputs else None
        inputs.append(
            {
                **_linked(model_admin, input_id, states),
                "arrival": str(ARRIVALS.get(arrival.kind, "")) if arrival else _("not arrived"),
            }
        )
    count = job.inputs.count if job.inputs else 0
    dependents = [_linked(model_admin, e.dependent, states) for e in edges]
    edge_count = len(job.dependents.edges) if job.dependents else 0
    return {
        "workflow": workflow,
        "inputs": inputs,
        "input_count": count,
        "more_inputs": max(0, len(job.inputs.ids) - len(inputs)) if job.inputs else 0,
        "every_node": job.inputs is not None and not job.inputs.ids and count > 0,
        "missing": job.inputs.missing if job.inputs else 0,
        "dependents": dependents,
        "more_dependents": edge_count - len(dependents),
        "linked_later": bool(job.dependents and job.dependents.linked),
    }


def _linked(
    model_admin: RqueueAdmin, job_id: str, states: dict[str, wl.JobState]
) -> dict[str, Any]:
    state = states.get(job_id)
    return {
        "id": job_id,
        "url": job_url(model_admin, job_id),
        "name": state.name if state else "",
        "state": str(state.status or _("unknown")) if state else _("gone"),
    }
