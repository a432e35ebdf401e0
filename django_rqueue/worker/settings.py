"""What a worker serves and for how long: ``rqueue_work``'s options that every child gets.

The master (:class:`~django_rqueue.master.supervisor.Supervisor`) checks one
:class:`WorkerSettings` as it starts and hands it to each worker child it forks
(:func:`~django_rqueue.master.children.run_child`), which runs a :class:`~.loop.Worker`
with it (:meth:`~.loop.Worker.supervised`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from ..conf import get_config
from .weights import QueueOrder


@dataclass(frozen=True)
class WorkerSettings:
    """A worker's settings.

    ``queues``: declared queue names, in priority order. ``weights``: queue -> integer
    >= 1, every queue, for a weighted random order per job (``None``: strict order,
    :mod:`~.weights`). ``burst``: exit once no job is queued or running on the queues.
    ``max_jobs``: exit after that many jobs (``None``: no limit). ``max_memory_mb``: exit
    after the job that left the process above that RSS in MiB (``None``: no limit).
    ``async_concurrency``: ``async def`` jobs run at once on the worker's event loop
    (``None``: ``RQUEUE["ASYNC_CONCURRENCY"]``, resolved by :meth:`checked`).
    """

    queues: tuple[str, ...]
    weights: Mapping[str, int] | None = None
    burst: bool = False
    max_jobs: int | None = None
    max_memory_mb: float | None = None
    async_concurrency: int | None = None

    def checked(self) -> WorkerSettings:
        """These settings once checked, with ``async_concurrency`` resolved (an ``int``).

        Raises:
            ValueError: a queue is not declared; ``weights`` do not match ``queues``;
                ``async_concurrency`` is not an integer >= 1.
        """
        config = get_config()
        config.queues_named(self.queues)
        concurrency = self.async_concurrency
        if concurrency is None:
            concurrency = config.async_concurrency
        if isinstance(concurrency, bool) or not isinstance(concurrency, int):
            raise ValueError(f"async_concurrency must be an integer, got {concurrency!r}")
        if concurrency < 1:
            raise ValueError(f"async_concurrency must be >= 1, got {concurrency}")
        QueueOrder(list(self.queues), self.weights)
        return dataclasses.replace(self, async_concurrency=concurrency)

    @property
    def async_slots(self) -> int:
        """``async def`` jobs run at once: ``async_concurrency``, or
        ``RQUEUE["ASYNC_CONCURRENCY"]`` when unset (settings :meth:`checked` have it set)."""
        if self.async_concurrency is None:
            return get_config().async_concurrency
        return self.async_concurrency
