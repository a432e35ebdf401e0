"""The workflow pages: a queue's workflows (newest first, a page at a time) and one
workflow's page, its graph drawn server-side (:mod:`.workflow_graph`).

Both read a bounded amount (:mod:`~django_rqueue.ops.workflow_listings`): a page of the
list reads two small ``HMGET`` per row; a workflow's page reads its record once, then a
few small fields of each node it shows (at most :data:`~.workflow_graph.MAX_NODES`), of
the inputs those nodes list from elsewhere (at most as many), of the finisher and of the
callbacks. No script: the graph is HTML boxes and, when small, an inline SVG.
"""

from __future__ import annotations

import json
from typing import Any, Final, cast

from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from .. import registry
from ..conf import get_config
from ..engine.fields import WorkflowFields
from ..engine.keys import finisher_id, queue_of
from ..exceptions import RedisUnavailable
from ..job import JobStatus
from ..job_functions import BaseJobFunction
from ..ops import workflow_listings as wl
from ..ops.listings import STATES
from ..workflows.handle import Workflow, WorkflowState
from . import workflow_graph as graph
from .common import (
    PAGE_SIZE,
    RqueueAdmin,
    context,
    declared_queue,
    has_permission,
    job_id_in_url,
    job_url,
    url,
    workflow_url,
)
from .detail import pretty

#: Inputs listed per node on the graph (the rest are counted).
INPUTS_SHOWN: Final = 10
#: The states in which a job has ended (its outcome is, or will be, delivered).
ENDED: Final = frozenset({JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED})
#: What each workflow action needs, and when it is offered.
ACTION_STATES: Final = {
    "cancel": (WorkflowState.RUNNING, "delete"),
    "retry-failed": (WorkflowState.FAILED, "change"),
}
#: The buttons of a workflow's page.
ACTION_LABELS: Final = {
    "cancel": gettext_lazy("Cancel workflow"),
    "retry-failed": gettext_lazy("Retry failed"),
}


def _state_label(workflow: Workflow) -> str:
    text = str(workflow.state)
    if workflow.cancel_requested:
        text += " " + _("(cancel requested)")
    if workflow.finisher_lost:
        text += " " + _("(finisher lost)")
    return text


def _progress(progress: wl.Progress | None) -> str:
    if progress is None:
        return ""
    return f"{progress.total} / {progress.ok} / {progress.failed} / {progress.cancelled}"


def workflow_list(request: HttpRequest, model_admin: RqueueAdmin, queue: str) -> HttpResponse:
    """List the workflows whose home is ``queue``, newest first, a page at a time; filter
    the page by state (``?state=``), or find one by id (``?id=``, with or without the
    ``<queue>:`` part)."""
    declared_queue(queue)
    shown_state = request.GET.get("state", "")
    if shown_state and shown_state not in set(WorkflowState):
        shown_state = ""
    search = request.GET.get("id", "").strip()
    extra: dict[str, Any] = {}
    rows: list[wl.WorkflowRow] = []
    try:
        if search:
            workflow_id = search if ":" in search else f"{queue}:{search}"
            if queue_of(workflow_id) in get_config().queues:
                rows = [r for r in wl.rows([workflow_id]) if r.workflow is not None]
        else:
            source = cast(Any, wl.WorkflowSource(queue))
            paginator: Paginator[wl.WorkflowRow] = Paginator(source, PAGE_SIZE)
            page_obj = paginator.get_page(request.GET.get("page"))
            rows = list(page_obj.object_list)
            extra.update(
                page_obj=page_obj,
                page_range=list(paginator.get_elided_page_range(page_obj.number)),
            )
    except RedisUnavailable as exc:
        extra["redis_error"] = str(exc)
    if shown_state:
        rows = [r for r in rows if r.workflow is not None and r.workflow.state == shown_state]
    title = _("Workflows")
    return TemplateResponse(
        request,
        "admin/django_rqueue/workflow_list.html",
        context(
            request,
            model_admin,
            f"{title} — {queue}",
            crumbs=[(queue, ""), (title, "")],
            queue=queue,
            state="workflows",
            states=_tabs(model_admin, queue),
            shown_state=shown_state,
            workflow_states=[s.value for s in WorkflowState],
            search=search,
            rows=[
                {
                    "id": r.id,
                    "url": workflow_url(model_admin, r.id),
                    "name": r.workflow.name if r.workflow else "",
                    "state": _state_label(r.workflow) if r.workflow else _("record gone"),
                    "state_class": r.workflow.state.value if r.workflow else "gone",
                    "progress": _progress(r.progress),
                    "created_at": r.created_at,
                    "finished_at": r.workflow.finished_at if r.workflow else None,
                }
                for r in rows
            ],
            **extra,
        ),
    )


def _tabs(model_admin: RqueueAdmin, queue: str) -> list[tuple[str, str]]:
    """The tabs of a queue's lists: one per job state, then its workflows."""
    tabs = [(s.value, url(model_admin, "django_rqueue_job_list", queue, s)) for s in STATES]
    return [*tabs, ("workflows", url(model_admin, "django_rqueue_workflows", queue))]


def workflow_detail(
    request: HttpRequest, model_admin: RqueueAdmin, workflow_id: str
) -> HttpResponse:
    """Show one workflow: its state, timings, result, callbacks, and its graph (at most
    :data:`~.workflow_graph.MAX_NODES` nodes, ``?layer=`` pages by layer)."""
    workflow_id = job_id_in_url(workflow_id)
    got = wl.read_record(workflow_id)
    if got is None:
        raise Http404(_("No workflow with this id: it ended and expired, or was never created."))
    workflow, fields = got
    problems = list(workflow.problems)
    try:
        spec = graph.Spec.parse(fields.get(WorkflowFields.SPEC))
    except ValueError as exc:
        problems.append(str(exc))
        spec = graph.Spec((), (), ())
    layer_of = graph.layers(spec)
    try:
        start = int(request.GET.get("layer", "0"))
    except ValueError:
        start = 0
    shown = graph.window(layer_of, start)
    indices = shown.indices
    on_page = set(indices)
    listed = {i: spec.inputs[i][:INPUTS_SHOWN] for i in indices}
    outside = [spec.nodes[k][0] for i in indices for k in listed[i] if k not in on_page] + [
        e for i in indices for e in spec.external[i][:INPUTS_SHOWN]
    ]
    callbacks = _callbacks(workflow, fields)
    finisher = finisher_id(workflow_id)
    ids = [spec.nodes[i][0] for i in indices]
    states = wl.job_states(
        [*ids, finisher, *[c["id"] for c in callbacks], *outside[: graph.MAX_NODES]]
    )
    for c in callbacks:
        state = states.get(c["id"])
        c["state"] = str(state.status or "") if state else ""
        c["url"] = job_url(model_admin, c["id"]) if state else ""
    nodes = {i: _node(model_admin, spec, i, listed[i], states, layer_of) for i in indices}
    points = graph.map_points(shown) if len(indices) <= graph.MAX_MAP_NODES else {}
    finisher_state = states.get(finisher)
    try:
        result = pretty(workflow.result) if workflow.result is not None else None
    except ValueError as exc:
        result, problems = None, [*problems, str(exc)]
    actions = [
        (action, ACTION_LABELS[action], workflow_url(model_admin, workflow_id, action))
        for action, (when, permission) in ACTION_STATES.items()
        if workflow.state is when and has_permission(request, model_admin, permission)
    ]
    queue = queue_of(workflow_id) or ""
    return TemplateResponse(
        request,
        "admin/django_rqueue/workflow_detail.html",
        context(
            request,
            model_admin,
            _("Workflow %(id)s") % {"id": workflow_id},
            crumbs=[
                (queue, ""),
                (_("Workflows"), url(model_admin, "django_rqueue_workflows", queue)),
                (workflow_id, ""),
            ],
            queue=queue,
            workflow=workflow,
            state_label=_state_label(workflow),
            problems=problems,
            node_count=len(spec.nodes),
            progress=_progress(wl.Progress.of(finisher_state) if finisher_state else None),
            duration=_duration(workflow),
            result=result,
            callbacks=callbacks,
            finisher={
                "id": finisher,
                "url": job_url(model_admin, finisher) if finisher_state else "",
                "state": str(finisher_state.status or "") if finisher_state else _("gone"),
            },
            layers=[(n, [nodes[i] for i in members]) for n, members in shown.layers],
            window=shown,
            shown_count=len(indices),
            max_nodes=graph.MAX_NODES,
            map=_map(spec, points, nodes),
            actions=actions,
        ),
    )


def _duration(workflow: Workflow) -> str:
    if workflow.created_at is None or workflow.finished_at is None:
        return ""
    seconds = (workflow.finished_at - workflow.created_at).total_seconds()
    return _("%(n)s seconds") % {"n": f"{seconds:.3f}"}


def _node(
    model_admin: RqueueAdmin,
    spec: graph.Spec,
    index: int,
    listed: tuple[int, ...],
    states: dict[str, wl.JobState],
    layer_of: list[int],
) -> dict[str, Any]:
    """What a node's box shows: its state (``gone``: the record expired), its inputs with
    theirs, and, while it waits, the inputs it still waits for."""
    node_id, name = spec.nodes[index]
    state = states.get(node_id)
    status = state.status if state else None
    inputs = [_input(model_admin, spec.nodes[k][0], states, spec.nodes[k][1]) for k in listed] + [
        _input(model_admin, e, states, "") for e in spec.external[index][:INPUTS_SHOWN]
    ]
    total = len(spec.inputs[index]) + len(spec.external[index])
    waits_for = []
    if status is JobStatus.WAITING:
        waits_for = [i for i in inputs if not i["ended"]]
    return {
        "index": index,
        "id": node_id,
        "url": job_url(model_admin, node_id),
        "name": name or (state.name if state else ""),
        "state": (str(status) if status else _("unknown")) if state else _("gone"),
        "class": status.value if status else "gone",
        "reason": str(state.cancel_reason or "") if state else "",
        "attempts": f"{state.attempts}/{state.max_attempts}" if state and state.attempts else "",
        "inputs": inputs,
        "more_inputs": total - len(inputs),
        "waits_for": waits_for,
        "missing": state.missing if state and status is JobStatus.WAITING else 0,
        "input_count": total,
        "layer": layer_of[index],
    }


def _input(
    model_admin: RqueueAdmin, job_id: str, states: dict[str, wl.JobState], name: str
) -> dict[str, Any]:
    state = states.get(job_id)
    status = state.status if state else None
    return {
        "id": job_id,
        "url": job_url(model_admin, job_id),
        "name": name or (state.name if state else ""),
        "state": (str(status) if status else _("unknown")) if state else _("gone"),
        # A gone record ended and expired (or was deleted: its dependents heard of it).
        "ended": state is None or status in ENDED,
    }


def _map(
    spec: graph.Spec, points: dict[int, graph.MapPoint], nodes: dict[int, dict[str, Any]]
) -> dict[str, Any] | None:
    """The inline SVG of the links between the nodes shown (``None``: too many nodes)."""
    if not points:
        return None
    width, height = graph.map_size(points)
    lines = [
        {"x1": points[k].x, "y1": points[k].y, "x2": p.x, "y2": p.y}
        for i, p in points.items()
        for k in spec.inputs[i]
        if k in points
    ]
    dots = [{"x": p.x, "y": p.y, "node": nodes[i]} for i, p in sorted(points.items())]
    return {"width": width, "height": height, "lines": lines, "dots": dots, "r": graph.RADIUS}


def _callbacks(workflow: Workflow, fields: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``on_error`` / ``on_complete`` callbacks the record holds, each with the id its
    job gets for the workflow's current finish (``<queue>:<random part>.e<gen>``)."""
    raw = fields.get(WorkflowFields.CALLBACKS)
    if not raw:
        return []
    try:
        specs = json.loads(raw)
    except ValueError:
        return []
    found = []
    random_part = workflow.id.partition(":")[2]
    for which, label in (("e", "on_error"), ("c", "on_complete")):
        spec = specs.get(which) if isinstance(specs, dict) else None
        if not isinstance(spec, dict):
            continue
        name = str(spec.get("n", ""))
        queue = _callback_queue(name, spec.get("o"))
        found.append(
            {
                "which": label,
                "name": name,
                "id": f"{queue}:{random_part}.{which}{workflow.generation}",
            }
        )
    return found


def _callback_queue(name: str, options: Any) -> str:
    """The queue a callback's job goes to: its ``using(queue=...)``, else its job's queue
    (when registered in this process), else the default queue."""
    if isinstance(options, dict) and isinstance(options.get("queue"), str):
        return str(options["queue"])
    job_function = registry.get(name)
    if isinstance(job_function, BaseJobFunction) and job_function.options.queue:
        return job_function.options.queue
    return get_config().default_queue
