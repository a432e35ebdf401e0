"""Workflows: ``chain``, ``group``, ``chord`` of signatures (``job.s()``, ``job.si()``).

The public names of workflows (DESIGN §8.2) that exist so far; ``Workflow``,
``WorkflowState`` and ``get_workflow`` come with the workflow handle.
"""

from __future__ import annotations

from ..dependencies import DependencyFailed
from ..options import NO_TIMEOUT
from .canvas import Chain, Group, chain, chord, group
from .signature import Signature

__all__ = [
    "NO_TIMEOUT",
    "Chain",
    "DependencyFailed",
    "Group",
    "Signature",
    "chain",
    "chord",
    "group",
]
