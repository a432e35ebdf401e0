"""The transitions of workflow records (``wf_record.lua``, ``wf_trim.lua``): commands and replies.

A workflow's record lives on its home queue (``<prefix>:{<queue>}:wf:<workflow id>``,
fields :class:`~.fields.WorkflowFields`). Every change of it goes through this one
script, so each change is atomic with its checks: a creation sent twice creates once, a
commit after a roll-back finds nothing, and ``finish`` decides the final state (a
``cancel()`` that came in first wins over what the finisher computed). Like
:mod:`~django_rqueue.engine.commands`, nothing here does I/O: the executors of
:mod:`~django_rqueue.engine.run` send these commands.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, NamedTuple, get_args

from .calls import Arg, ScriptCall, pairs
from .commands import Command
from .keys import QueueKeys
from .replies import Reply, items, number, text


class RecordState(enum.StrEnum):
    """A workflow record's state (:attr:`~.fields.WorkflowFields.STATE`)."""

    #: Written in several steps, not committed yet: rolled back when its creator stalls.
    CREATING = "creating"
    RUNNING = "running"
    #: ``cancel()`` was asked; its nodes are still ending.
    CANCELLING = "cancelling"
    #: ``retry_failed()`` is re-arming its nodes.
    REOPENING = "reopening"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


#: The states a record does not leave by itself (``reopen`` takes a failed one back).
FINAL = frozenset({RecordState.SUCCEEDED, RecordState.FAILED, RecordState.CANCELLED})

#: What the script answered: ``ok`` done; ``exists`` a creation found the record there
#: already; ``gone`` no record (never created, rolled back, or expired); ``state`` refused
#: in :attr:`RecordReply.state`; ``first``/``done`` a finish that ended the workflow now,
#: or found it ended already.
Outcome = Literal["ok", "exists", "gone", "state", "first", "done"]


@dataclass(frozen=True, slots=True)
class RecordReply:
    """``wf_record.lua``'s reply."""

    outcome: Outcome
    #: ``state``: the state that refused the change; ``first``/``done``: the final state;
    #: ``cancel``: the state before it (running or cancelling); else ``None``.
    state: RecordState | None = None
    #: The finish generation (``finish``, ``reopen``); else ``None``.
    generation: int | None = None

    @property
    def done(self) -> bool:
        """Whether the change was made (``ok`` or ``first``)."""
        return self.outcome in ("ok", "first")


_OUTCOMES: dict[str, Outcome] = {o: o for o in get_args(Outcome)}


def _reply(reply: Reply) -> RecordReply:
    got = items(reply)
    outcome = _OUTCOMES.get(text(got[0]))
    if outcome is None:
        raise ValueError(f"wf_record replied {reply!r}")
    if outcome in ("first", "done"):
        return RecordReply(outcome, RecordState(text(got[1])), number(got[2]))
    if outcome == "state" or (outcome == "ok" and len(got) > 1 and isinstance(got[1], bytes | str)):
        return RecordReply(outcome, RecordState(text(got[1])))
    if outcome == "ok" and len(got) > 1:
        return RecordReply(outcome, generation=number(got[1]))
    return RecordReply(outcome)


def _call(keys: QueueKeys, mode: str, workflow_id: str, *args: Arg) -> Command[RecordReply]:
    record_keys = [keys.base, keys.workflow(workflow_id), keys.workflows, keys.opening, keys.stats]
    return Command(ScriptCall("wf_record", record_keys, [mode, workflow_id, *args]), _reply)


def create(
    keys: QueueKeys, workflow_id: str, fields: Mapping[str, str | int]
) -> Command[RecordReply]:
    """Write the record of a workflow created in one step, ``running`` (``ok``; ``exists``
    when sent again). ``fields``: its :class:`~.fields.WorkflowFields` besides the state,
    the creation time and the generation, which the script writes. Counts ``wfstarted``."""
    return _call(keys, "create", workflow_id, *pairs(fields))


def open_record(
    keys: QueueKeys, workflow_id: str, grace_ms: int, fields: Mapping[str, str | int]
) -> Command[RecordReply]:
    """Write the record of a workflow created in several steps, ``creating``, with a
    roll-back deadline ``grace_ms`` from now in ``wfopen`` (``ok``; ``exists``)."""
    return _call(keys, "open", workflow_id, grace_ms, *pairs(fields))


def commit(keys: QueueKeys, workflow_id: str, grace_ms: int) -> Command[RecordReply]:
    """The commit point of a creation in several steps: ``creating`` -> ``running``, with a
    roll-forward deadline ``grace_ms`` from now; counts ``wfstarted``. ``gone`` when it
    was rolled back meanwhile, ``state`` when not ``creating``."""
    return _call(keys, "commit", workflow_id, grace_ms)


def opened(keys: QueueKeys, workflow_id: str) -> Command[RecordReply]:
    """A creation in several steps is complete: the workflow leaves ``wfopen`` (``ok``)."""
    return _call(keys, "opened", workflow_id)


def abort(keys: QueueKeys, workflow_id: str) -> Command[RecordReply]:
    """Roll back a creation that was not committed: delete the record, only while it is
    ``creating`` (``ok``; ``state`` once committed; ``gone``)."""
    return _call(keys, "abort", workflow_id)


def cancel(keys: QueueKeys, workflow_id: str) -> Command[RecordReply]:
    """``running``/``cancelling`` -> ``cancelling`` (``ok`` with the state before);
    ``state`` for any other state, ``gone`` for no record."""
    return _call(keys, "cancel", workflow_id)


def finish(
    keys: QueueKeys, workflow_id: str, state: RecordState, result: str, ttl: int
) -> Command[RecordReply]:
    """End the workflow (its finisher, once every node ended): ``state`` is what the
    finisher computed (``succeeded`` or ``failed``), made ``cancelled`` when a cancel came
    first; ``result`` its result as stored (``""``: none); the record expires ``ttl``
    seconds later (0: deleted at once). ``first`` the first time, ``done`` when it had
    ended already (a finisher run again), each with the final state and generation.

    Raises:
        ValueError: ``state`` is not ``succeeded`` or ``failed``.
    """
    if state not in (RecordState.SUCCEEDED, RecordState.FAILED):
        raise ValueError(f"a finisher computes succeeded or failed, not {state!r}")
    return _call(keys, "finish", workflow_id, state.value, result, ttl)


def signalled(keys: QueueKeys, workflow_id: str, generation: int) -> Command[RecordReply]:
    """Note that ``workflow_finished`` was sent for the finish ``generation`` (``ok``)."""
    return _call(keys, "signalled", workflow_id, generation)


def reopen(keys: QueueKeys, workflow_id: str, grace_ms: int, plan: str) -> Command[RecordReply]:
    """Start ``retry_failed()``: ``failed`` -> ``reopening`` with the re-arm ``plan`` (JSON),
    the next generation, no TTL, a roll-forward deadline ``grace_ms`` from now in
    ``wfopen``; counts ``wfstarted`` (``ok`` with the new generation; ``state``; ``gone``)."""
    return _call(keys, "reopen", workflow_id, grace_ms, plan)


def reopened(keys: QueueKeys, workflow_id: str) -> Command[RecordReply]:
    """``retry_failed()`` re-armed every node: ``reopening`` -> ``running`` (``ok``)."""
    return _call(keys, "reopened", workflow_id)


#: Members of a queue's ``wfs`` one :func:`trim` looks at, at most.
TRIM_LIMIT = 200


class Trimmed(NamedTuple):
    """``wf_trim.lua``'s reply."""

    #: Workflows forgotten (their record was gone).
    removed: int
    #: The rank the next call starts from (``0``: the walk reached the end).
    next_rank: int


def _trimmed(reply: Reply) -> Trimmed:
    got = items(reply)
    return Trimmed(number(got[0]), number(got[1]))


def trim(keys: QueueKeys, first_rank: int, limit: int = TRIM_LIMIT) -> Command[Trimmed]:
    """Forget the workflows of the queue whose record is gone (``wf_trim.lua``), looking at
    ``limit`` members of ``wfs`` from ``first_rank`` on (oldest first)."""
    return Command(
        ScriptCall("wf_trim", [keys.base, keys.workflows], [first_rank, limit]), _trimmed
    )
