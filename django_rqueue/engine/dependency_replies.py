"""The replies of the dependency transitions: one typed result and one pure parser per script
(``wf_nodes.lua``, ``dep_apply.lua``, ``dep_link.lua``; no I/O).

The twin of :mod:`~django_rqueue.engine.replies` for the scripts of
:mod:`~django_rqueue.engine.dependency_calls`; the header of each ``.lua`` file documents
its reply.
"""

from __future__ import annotations

from .replies import Reply, items, number, text


def nodes_refused(reply: Reply) -> list[tuple[int, str]]:
    """``wf_nodes.lua``: ``(index, outcome)`` of each node not created (index 0-based in the
    batch; outcome ``"exists"``: the id was written already, by an earlier send of the same
    batch); ``[]`` when every node was created."""
    got = items(reply)
    return [(number(got[i]) - 1, text(got[i + 1])) for i in range(0, len(got), 2)]
