"""Workflows: ``chain``, ``group``, ``chord`` of signatures (``job.s()``, ``job.si()``), and
the :class:`Workflow` handle that ``.delay()`` returns and :func:`get_workflow` reads."""

from __future__ import annotations

from ..dependencies import DependencyFailed
from ..options import NO_TIMEOUT
from .canvas import Chain, Group, chain, chord, group
from .handle import Workflow, WorkflowState, get_workflow
from .signature import Signature

__all__ = [
    "NO_TIMEOUT",
    "Chain",
    "DependencyFailed",
    "Group",
    "Signature",
    "Workflow",
    "WorkflowState",
    "chain",
    "chord",
    "get_workflow",
    "group",
]
