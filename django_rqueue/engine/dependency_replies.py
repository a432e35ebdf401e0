"""The replies of the dependency transitions: one typed result and one pure parser per script
(``wf_nodes.lua``, ``dep_apply.lua``, ``dep_link.lua``; no I/O).

The twin of :mod:`~django_rqueue.engine.replies` for the scripts of
:mod:`~django_rqueue.engine.dependency_calls`; the header of each ``.lua`` file documents
its reply.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from .replies import Reply, items, number, text


class Applied(NamedTuple):
    """What one ``dep_apply.lua`` call did with its arrivals."""

    #: Arrivals recorded (each on a waiting job that had not had that input yet).
    applied: int
    #: Arrivals that changed nothing: the input had arrived already, the outcome was older
    #: than a re-arm, or the job was not waiting (gone, or decided).
    duplicates: int
    #: Jobs whose last input this was, released (queued or scheduled).
    released: int
    #: Jobs whose last input this was, ended instead (cancelled ``dependency_failed``, or
    #: expired); their own dependents were notified.
    ended: int


def dep_applied(reply: Reply) -> Applied:
    """``dep_apply.lua``: ``{applied, duplicates, released, ended}``."""
    got = items(reply)
    return Applied(number(got[0]), number(got[1]), number(got[2]), number(got[3]))


def nodes_refused(reply: Reply) -> list[tuple[int, str]]:
    """``wf_nodes.lua``: ``(index, outcome)`` of each node not created (index 0-based in the
    batch; outcome ``"exists"``: the id was written already, by an earlier send of the same
    batch); ``[]`` when every node was created."""
    got = items(reply)
    return [(number(got[i]) - 1, text(got[i + 1])) for i in range(0, len(got), 2)]


class LinkOutcome(enum.StrEnum):
    """What ``dep_link.lua`` did with a new edge to an existing job."""

    #: The job has not ended: its end will deliver to the dependent.
    LINKED = "linked"
    #: The job had ended and the dependent, on its queue, has recorded its outcome.
    SETTLED = "settled"
    #: The job had ended and the dependent is on another queue: apply
    #: :attr:`Linked.value` there (``dep_apply.lua``).
    ENDED = "ended"
    #: The job's record is gone (or never was, or is not a job hash): nothing to wait for.
    MISSING = "missing"


class Linked(NamedTuple):
    """``dep_link.lua``'s reply."""

    outcome: LinkOutcome
    #: For :attr:`LinkOutcome.ENDED`, the arrival value to apply; else ``None``.
    value: str | None = None


def linked(reply: Reply) -> Linked:
    """``dep_link.lua``: ``{'linked'}``, ``{'settled'}``, ``{'ended', value}`` or ``{'missing'}``.

    Raises:
        ValueError: an outcome this version does not know.
    """
    got = items(reply)
    outcome = LinkOutcome(text(got[0]))
    return Linked(outcome, text(got[1]) if outcome == LinkOutcome.ENDED else None)


# -- the dependency deadline (waiting_sweep.lua) ---------------------------------------------


class Swept(NamedTuple):
    """What one ``waiting_sweep.lua`` call did."""

    #: Waiting jobs past their dependency deadline, now cancelled ``dependency_timeout``
    #: (their dependents were told).
    cancelled: int
    #: Standalone ``depends_on`` jobs whose gate never opened, deleted (never created, for
    #: their caller).
    aborted: int
    #: Ms until the next dependency deadline; -1: none; 0: the batch was full, more are due.
    next_deadline_ms: int


def swept(reply: Reply) -> Swept:
    """``waiting_sweep.lua``: ``{cancelled, aborted, ms until the next deadline}``."""
    got = items(reply)
    return Swept(number(got[0]), number(got[1]), number(got[2]))
