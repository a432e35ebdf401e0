"""The context a ``@job(takes_context=True)`` function gets first: :class:`JobContext`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import progress

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

    def set_progress(
        self, current: int | float, total: int | float | None = None, message: str = ""
    ) -> None:
        """Record the job's progress: ``current`` out of ``total`` (``None``: unknown),
        with an optional ``message``; readable at once from any process as
        :attr:`Job.progress <django_rqueue.job.Job.progress>` (and on
        ``context.job.progress``). Each call replaces the previous report.

        One round trip to Redis per call (nothing is skipped or batched): in a loop over
        many items, report every N items or so. EAGER mode only sets ``job.progress``.
        From an ``async def`` job use :meth:`aset_progress` (this blocks the event loop
        for the round trip).

        Raises:
            TypeError: a number is not an int or a float, or ``message`` not a str.
            ValueError: a number is negative, NaN or infinite, ``total`` is 0, or
                ``message`` is longer than :data:`~django_rqueue.progress.MAX_MESSAGE_LENGTH`.
            LeaseLost: this attempt no longer holds the job (its lease was reclaimed
                and the job may run elsewhere): nothing was written.
            RedisUnavailable: Redis cannot be reached.
        """
        job = self.job
        job.progress = progress.set_progress(job.queue, job.id, job.token, current, total, message)

    async def aset_progress(
        self, current: int | float, total: int | float | None = None, message: str = ""
    ) -> None:
        """:meth:`set_progress` for ``async def`` jobs, on redis-py's asyncio client."""
        job = self.job
        job.progress = await progress.aset_progress(
            job.queue, job.id, job.token, current, total, message
        )

    @property
    def metadata(self) -> dict[str, Any]:
        """The job's metadata, a dict to change in place and write with
        :meth:`save_metadata`; it starts as the record holds it (``{}``, or what an
        earlier attempt saved). The same dict as ``context.job.metadata``."""
        return self.job.metadata

    def save_metadata(self) -> None:
        """Write :attr:`metadata` to the job's record (replacing what was saved); readable
        at once from any process as :attr:`Job.metadata <django_rqueue.job.Job.metadata>`.
        One round trip; stored encrypted under ``RQUEUE["ENCRYPTION_KEYS"]``. EAGER mode
        only checks it.

        Raises:
            TypeError: :attr:`metadata` is not JSON (a dict with str keys of dict, list,
                str, int, float, bool and None).
            ValueError: a float is NaN or infinite, or its JSON is larger than
                :data:`~django_rqueue.progress.MAX_METADATA_BYTES`.
            LeaseLost: this attempt no longer holds the job: nothing was written.
            RedisUnavailable: Redis cannot be reached.
        """
        job = self.job
        progress.save_metadata(job.queue, job.id, job.token, job.metadata)

    async def asave_metadata(self) -> None:
        """:meth:`save_metadata` for ``async def`` jobs, on redis-py's asyncio client."""
        job = self.job
        await progress.asave_metadata(job.queue, job.id, job.token, job.metadata)
