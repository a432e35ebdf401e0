"""Compile a workflow into the plan of what to write (:class:`WorkflowPlan`): pure, no Redis.

:func:`compile` walks a canvas (:mod:`~django_rqueue.workflows.canvas`) in declared order
and gives every node (a signature) an id, its job-hash fields, its edges and its place; it
adds the finisher ``F`` (a job named :data:`FINISHER_NAME` on the *home* queue, waiting for
every node, see :func:`home_queue`), the callbacks' specs and the workflow record's
fields, and decides the creation path: ``live`` (one ``MULTI`` on one location) or
``staged`` (gated nodes behind a commit point). Every argument is checked and encoded as
``.delay()`` does (:class:`~django_rqueue.enqueue.plan.Plan`) before the plan exists: an
invalid one anywhere raises and nothing is produced. :meth:`WorkflowPlan.batches` gives the
``wf_nodes.lua`` calls, per queue, at most :data:`BATCH_NODES` nodes each.

The walk reads elements through their attributes (``kind``, ``members``, ``job_function``,
...), so that this module imports neither :mod:`.canvas` nor :mod:`.signature` (the canvas
imports it for ``.delay()``).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal

from ..conf import Config, get_config
from ..dependencies import Dependents, Edge, edge_entry
from ..encryption import seal
from ..engine.calls import Arg
from ..engine.connection import LocationKind, location_of
from ..engine.fields import RECORD_DEFAULTS, JobFields, WorkflowFields
from ..engine.keys import finisher_id, new_job_id, queue_of
from ..enqueue.plan import Plan
from ..options import NO_TIMEOUT, JobOptions, NoTimeout
from ..serialization import encode_arguments
from .nodes import (
    ATOMIC_MAX_NODES,
    FINISHER_MAX_ATTEMPTS,
    FINISHER_NAME,
    Link,
    NodePlan,
    WorkflowPlan,
)
from .shapes import Tree, encode_shape, flatten, spec_json

if TYPE_CHECKING:
    from ..types import JobSpec

#: What a check binds in place of the value prepended to a signature's arguments.
PREPENDED: Final[Any] = object()


def check_arguments(
    job_function: JobSpec,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    *,
    prepended: bool,
    maybe: bool = False,
) -> bool:
    """Check ``args`` and ``kwargs`` as ``.delay()`` does, after one prepended value when
    ``prepended`` (``maybe``: also accept them with one prepended value); return whether
    they fit as they are, without a prepended value.

    Raises:
        TypeError: they do not fit the function's signature (``.delay()``'s message).
    """
    if prepended:
        job_function.check_arguments((PREPENDED, *args), kwargs)
        return False
    try:
        job_function.check_arguments(args, kwargs)
    except TypeError:
        if not maybe:
            raise
        try:
            job_function.check_arguments((PREPENDED, *args), kwargs)
        except TypeError:
            pass
        else:
            return False
        raise
    return True


def compile(element: object, config: Config | None = None) -> WorkflowPlan:  # noqa: A001
    """The plan of the workflow ``element`` (a chain, a group or a signature) describes.

    Raises:
        TypeError: something that is not an element; arguments that do not fit a job's
            signature or that JSON cannot carry (the message names the node).
        ValueError: an option a node cannot take (``unique_key``, ``job_id``,
            ``on_commit``, its own ``dependency_timeout``, ``pass_results`` after another
            element), the options of a canvas below the top, an undeclared queue,
            arguments over ``RQUEUE["MAX_PAYLOAD_BYTES"]``.
    """
    return _Compiler(config or get_config()).compile(element)


@dataclasses.dataclass(slots=True)
class _Draft:
    """A node during the walk."""

    signature: Any
    plan: Plan
    id: str
    payload: str
    #: Node indices it waits for, in input order.
    after: tuple[int, ...]
    #: The prepended value as a tree of node indices (``None``: nothing prepended).
    tree: Tree | None
    external: tuple[str, ...]


#: The walk's running output: the shape (node indices) and the nodes a next element waits for.
_Flow = tuple[Tree, tuple[int, ...]]


class _Compiler:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.force = config.workflow_force_outbox
        self.drafts: list[_Draft] = []

    def compile(self, element: object) -> WorkflowPlan:
        kind = getattr(element, "kind", None)
        if kind not in ("signature", "chain", "group"):
            raise TypeError(f"a workflow is a chain, a group or a signature, got {element!r:.80}")
        shape, _ = self.walk(element, None, top=True)
        drafts = self.drafts
        dependents: list[list[tuple[int, int]]] = [[] for _ in drafts]
        for j, draft in enumerate(drafts):
            for k, i in enumerate(draft.after, start=1):
                dependents[i].append((j, k))
        exits = set(flatten(shape))
        home = home_queue([d.plan.queue for d in drafts], dependents, self.config)
        wf_id = new_job_id(home)
        fid = finisher_id(wf_id)
        nodes = tuple(
            self.node(i, d, drafts, dependents[i], i in exits, wf_id, fid, home)
            for i, d in enumerate(drafts)
        )
        finisher = self.finisher(wf_id, fid, home, shape)
        links = tuple(self.links(drafts, nodes))
        timeout = getattr(element, "dependency_timeout", None)
        deadline_ms = _deadline_ms(timeout, self.config)
        # An external parent on another queue than its dependent stages the creation by
        # itself (``here`` is false), so the places are those of the nodes and the record.
        places = _places([*(n.queue for n in nodes), home])
        live = (
            len(places) == 1
            and len(nodes) <= ATOMIC_MAX_NODES
            and not self.force
            and all(lk.here for lk in links)
        )
        edges = tuple((i, j) for i, ds in enumerate(dependents) for j, _ in ds)
        record: dict[str, Arg] = {
            WorkflowFields.NODE_COUNT: len(nodes),
            WorkflowFields.NAME: _name(nodes, dependents),
            WorkflowFields.SPEC: spec_json(
                [(n.id, n.name) for n in nodes],
                edges,
                [(parent, i) for i, d in enumerate(drafts) for parent in d.external],
                shape,
                places,
            ),
            WorkflowFields.GENERATION: 0,
        }
        callbacks = {
            which: self.callback(which, signature)
            for which, signature in (
                ("e", getattr(element, "error_callback", None)),
                ("c", getattr(element, "complete_callback", None)),
            )
            if signature is not None
        }
        if callbacks:
            record[WorkflowFields.CALLBACKS] = json.dumps(callbacks, separators=(",", ":"))
        if deadline_ms >= 0:
            record[WorkflowFields.DEPENDENCY_TIMEOUT] = deadline_ms / 1000
        return WorkflowPlan(
            id=wf_id,
            home=home,
            nodes=nodes,
            finisher=finisher,
            edges=edges,
            links=links,
            shape=shape,
            record=record,
            path="live" if live else "staged",
            deadline_ms=deadline_ms,
            places=places,
            key_prefix=self.config.key_prefix,
        )

    # -- the walk ------------------------------------------------------------------------

    def walk(self, element: Any, incoming: _Flow | None, *, top: bool = False) -> _Flow:
        kind = element.kind
        if kind == "signature":
            index = self.add(element, incoming)
            return index, (index,)
        if not top and element.has_options:
            raise ValueError(
                "on_error, on_complete and using(dependency_timeout=...) apply to a whole "
                f"workflow: set them on the outermost canvas, not on {element!r:.80}"
            )
        if kind == "chain":
            flow = incoming
            for member in element.members:
                flow = self.walk(member, flow)
            if flow is None:  # pragma: no cover - chain() refuses no element
                raise ValueError("an empty chain")
            return flow
        trees: list[Tree] = []
        after: dict[int, None] = {}
        for member in element.members:
            tree, member_after = self.walk(member, incoming)
            trees.append(tree)
            after.update(dict.fromkeys(member_after))
        if not element.members and incoming is not None:
            after.update(dict.fromkeys(incoming[1]))
        return trees, tuple(after)

    def add(self, signature: Any, incoming: _Flow | None) -> int:
        index = len(self.drafts)
        o: JobOptions = signature.options
        external = o.depends_on or ()
        after = incoming[1] if incoming is not None else ()
        tree: Tree | None = None
        if incoming is not None and not signature.immutable:
            position = {node: k for k, node in enumerate(after, start=1)}
            tree = _mapped(incoming[0], position)
        try:
            _refuse(o, has_inputs=incoming is not None, external=bool(external))
            if o.pass_results:
                tree = list(range(1, len(external) + 1))
            plan = Plan.of(signature.job_function, self.config, o)
            if plan.unique_key is not None:
                raise ValueError("a unique_key is not allowed on a workflow node")
            for parent in external:
                self.config.queue(queue_of(parent) or "")
            job_id, payload = _encode(
                plan,
                signature.args,
                signature.kwargs,
                prepended=tree is not None,
                checked=signature.fits_as_is,
            )
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"workflow node {index} ({signature.name}): {exc}") from exc
        self.drafts.append(_Draft(signature, plan, job_id, payload, after, tree, external))
        return index

    # -- nodes -----------------------------------------------------------------------------

    def node(
        self,
        index: int,
        draft: _Draft,
        drafts: list[_Draft],
        dependents: list[tuple[int, int]],
        is_exit: bool,
        wf_id: str,
        finisher_id: str,
        home: str,
    ) -> NodePlan:
        plan, o = draft.plan, draft.signature.options
        queue = plan.queue
        entries = [
            edge_entry("p", self.path(queue, drafts[j].plan.queue), k, drafts[j].id)
            for j, k in dependents
        ]
        entries.append(
            edge_entry("p" if is_exit else "c", self.path(queue, home), index + 1, finisher_id)
        )
        inputs = (*(drafts[i].id for i in draft.after), *draft.external)
        fields: dict[str, str | int] = {**plan.record, JobFields.PAYLOAD: draft.payload}
        fields[JobFields.WORKFLOW] = wf_id
        fields[JobFields.DEPENDENTS] = " ".join(entries)  # as Dependents.encode() joins them
        source = not draft.after
        if inputs or draft.tree is not None:  # a body after an empty group: 0 inputs, []
            fields[JobFields.INPUT_COUNT] = len(inputs)
        if inputs:
            fields[JobFields.INPUT_IDS] = " ".join(inputs)
            if o.on_dependency_failure == "run":
                fields[JobFields.ON_DEPENDENCY_FAILURE] = "r"
        if draft.tree is not None:
            fields[JobFields.PASS_SHAPE] = encode_shape(draft.tree, len(inputs))
        if inputs and plan.delay_ms > 0:  # it waits: the delay counts from its release
            fields[JobFields.RELEASE_DELAY] = plan.delay_ms
        args, kwargs = draft.signature.args, draft.signature.kwargs
        headers = plan.headers(draft.id, args, kwargs)  # RQUEUE["MIDDLEWARE"]'s
        if headers:
            fields[JobFields.HEADERS] = headers
        return NodePlan(
            index=index,
            id=draft.id,
            name=plan.job_function.name,
            queue=plan.queue,
            priority=plan.priority,
            group=plan.group,
            delay_ms=0 if inputs else plan.delay_ms,
            run_at_ms=plan.run_at_ms,
            source=source,
            input_ids=inputs,
            fields=fields,
            plan=plan,
            args=tuple(args),
            kwargs=kwargs,
        )

    def finisher(self, wf_id: str, finisher_id: str, home: str, shape: Tree) -> NodePlan:
        count = len(self.drafts)
        fields: dict[str, str | int] = {
            JobFields.NAME: FINISHER_NAME,
            JobFields.PAYLOAD: seal(encode_arguments((), {})),
            JobFields.MAX_ATTEMPTS: FINISHER_MAX_ATTEMPTS,
        }
        result_ttl = self.config.queue(home).result_ttl
        if result_ttl != RECORD_DEFAULTS[JobFields.RESULT_TTL]:
            fields[JobFields.RESULT_TTL] = result_ttl
        fields[JobFields.WORKFLOW] = wf_id
        fields[JobFields.DEPENDENTS] = Dependents(finisher=True).encode()
        fields[JobFields.INPUT_COUNT] = count  # 0 in an empty workflow: its finisher runs at once
        fields[JobFields.ON_DEPENDENCY_FAILURE] = "r"
        fields[JobFields.PASS_SHAPE] = encode_shape(
            _mapped(shape, {i: i + 1 for i in range(count)}), count
        )
        return NodePlan(
            index=count,
            id=finisher_id,
            name=FINISHER_NAME,
            queue=home,
            priority=0,
            group="",
            delay_ms=0,
            run_at_ms=-1,
            source=count == 0,
            input_ids=tuple(d.id for d in self.drafts),
            fields=fields,
        )

    def callback(self, which: str, signature: Any) -> dict[str, Any]:
        """The spec of an ``on_error`` (``e``) / ``on_complete`` (``c``) signature, as the
        finisher enqueues it: ``{"n": job name, "p": payload (as stored), "i": 1 when
        immutable, "o": the options its ``using()`` set, JSON (datetimes in ISO 8601)}``;
        a mutable one gets the workflow id first (checked so)."""
        o: JobOptions = signature.options
        where = f"{'on_error' if which == 'e' else 'on_complete'} ({signature.name})"
        try:
            _refuse(o, has_inputs=True, external=False)
            if o.depends_on is not None or o.on_dependency_failure is not None:
                raise ValueError("a callback has no inputs (depends_on, ...)")
            plan = Plan.of(signature.job_function, self.config, o)
            if plan.unique_key is not None:
                raise ValueError("a unique_key is not allowed on a callback")
            _, payload = _encode(
                plan,
                signature.args,
                signature.kwargs,
                prepended=not signature.immutable,
                checked=signature.fits_as_is,
            )
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{where}: {exc}") from exc
        base = signature.job_function.options
        own = {
            f.name: _json_option(getattr(o, f.name))
            for f in dataclasses.fields(o)
            if getattr(o, f.name) != getattr(base, f.name)
        }
        return {"n": signature.name, "p": payload, "i": int(signature.immutable), "o": own}

    def links(self, drafts: list[_Draft], nodes: tuple[NodePlan, ...]) -> Iterator[Link]:
        for draft, node in zip(drafts, nodes, strict=True):
            for offset, parent in enumerate(draft.external):
                k = len(draft.after) + offset + 1
                path = self.path(queue_of(parent) or "", node.queue)
                yield Link(parent, node.id, k, Edge("p", path, k, node.id).encode(), path == "i")

    def path(self, from_queue: str, to_queue: str) -> Literal["i", "o"]:
        """An edge's path: inline iff both jobs are on one queue and the outbox is not forced."""
        return "i" if from_queue == to_queue and not self.force else "o"


def home_queue(
    queues: Sequence[str], dependents: Sequence[Sequence[object]], config: Config
) -> str:
    """The queue of the record and the finisher: the one holding most nodes; on a tie, the
    queue of the last sink (a node nothing in the workflow waits for) among the tied ones
    (else the tied queue of the last node); the default queue for an empty workflow."""
    if not queues:
        return config.default_queue
    counts: dict[str, int] = {}
    for queue in queues:
        counts[queue] = counts.get(queue, 0) + 1
    most = max(counts.values())
    tied = {q for q, c in counts.items() if c == most}
    if len(tied) == 1:
        return tied.pop()
    sinks = [i for i, ds in enumerate(dependents) if not ds]
    for i in (*reversed(sinks), *reversed(range(len(queues)))):
        if queues[i] in tied:
            return queues[i]
    raise AssertionError("unreachable")  # pragma: no cover


def _mapped(tree: Tree, position: Mapping[int, int]) -> Tree:
    if isinstance(tree, int):
        return position[tree]
    return [_mapped(t, position) for t in tree]


def _refuse(o: JobOptions, *, has_inputs: bool, external: bool) -> None:
    """The options a node cannot take (``ValueError``; the caller names the node)."""
    for name, value in (("job_id", o.job_id), ("unique_key", o.unique_key)):
        if value is not None:
            raise ValueError(
                f"{name} is not allowed on a workflow node (a duplicate or an "
                "existing id would leave a hole in the graph)"
            )
    if o.on_commit is not None:
        raise ValueError("on_commit applies to the whole workflow, not to a node")
    if o.dependency_timeout is not None:
        raise ValueError(
            "dependency_timeout applies to the whole workflow: canvas.using(dependency_timeout=...)"
        )
    if o.pass_results is not None and (has_inputs or not external):
        raise ValueError(
            "pass_results applies to a node with depends_on and no input inside "
            "the workflow; after another element use .s() (results first) or .si() (none)"
        )


def _encode(
    plan: Plan,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    *,
    prepended: bool,
    checked: bool = False,
) -> tuple[str, str]:
    """A node's id and payload, as ``.delay()`` makes them (:meth:`Plan.submission`: the same
    checks, encoding, size limit and encryption); with ``prepended``, the arguments are
    checked after one prepended value; ``checked``: they are known to fit without one
    (:meth:`.Signature.of` checked them), so the check is not made twice."""
    job_function = plan.job_function
    if prepended:
        check_arguments(job_function, args, kwargs, prepended=True)
    elif not checked:
        job_function.check_arguments(args, kwargs)
    skip = int(prepended) + int(job_function.takes_context)
    payload = encode_arguments(args, kwargs, job_function.func, skip=skip)
    if len(payload) > plan.max_payload:
        raise ValueError(
            f"the arguments of {job_function.name} take {len(payload)} bytes as JSON, more "
            f"than RQUEUE['MAX_PAYLOAD_BYTES'] ({plan.max_payload}): store the data "
            "elsewhere and pass its key"
        )
    return new_job_id(plan.queue), seal(payload)


def _json_option(value: object) -> object:
    """An option as JSON carries it (a datetime in ISO 8601)."""
    return value.isoformat() if isinstance(value, datetime.datetime) else value


def _deadline_ms(timeout: float | NoTimeout | None, config: Config) -> int:
    """The dependency deadline offset in ms (-1: none): the canvas's, else the setting's."""
    if timeout is NO_TIMEOUT:
        return -1
    if timeout is None:
        timeout = config.workflow_dependency_timeout
        if timeout is None:
            return -1
    return -1 if isinstance(timeout, NoTimeout) else max(1, round(timeout * 1000))


def _places(queues: Sequence[str]) -> tuple[tuple[str, ...], ...]:
    """The queues by location: one Redis server, or one queue per Cluster slot."""
    places: dict[object, dict[str, None]] = {}
    for queue in dict.fromkeys(queues):  # each queue once
        location = location_of(queue)
        key = (location, queue) if location.kind is LocationKind.CLUSTER else location
        places.setdefault(key, {})[queue] = None
    return tuple(tuple(qs) for qs in places.values())


def _name(nodes: Sequence[NodePlan], dependents: Sequence[Sequence[object]]) -> str:
    """The workflow's display name: its last sink's job name (``""`` when it has no node)."""
    sinks = [n for n, ds in zip(nodes, dependents, strict=True) if not ds]
    return sinks[-1].name if sinks else ""
