"""The context a ``@job(takes_context=True)`` function gets first: :class:`JobContext`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .job import Job


@dataclass(frozen=True)
class JobContext:
    """Passed first to a ``@job(takes_context=True)`` function (as ``django.tasks``'s
    ``TaskContext``): the running ``job`` and its ``attempt`` number, counted from 1
    (equal to ``job.attempts`` while the attempt runs)."""

    job: Job[Any]
    attempt: int

    @property
    def workflow_id(self) -> str | None:
        """The id of the workflow the job is a node of; ``None`` outside any workflow."""
        return self.job.workflow_id

    @property
    def inputs(self) -> list[Any]:
        """The value of each input, in order (``[]`` for a job that waited for nothing): an
        input's result, or a :class:`~django_rqueue.dependencies.DependencyFailed` for an
        input that did not succeed (only under ``on_dependency_failure="run"``). Readable
        whether or not they are passed to the function (``.si()``, ``pass_results=False``).

        Raises:
            ValueError: an input's value cannot be decoded (for instance, encrypted with a
                key no longer in ``RQUEUE["ENCRYPTION_KEYS"]``).
        """
        inputs = self.job.inputs
        return inputs.values() if inputs is not None else []
