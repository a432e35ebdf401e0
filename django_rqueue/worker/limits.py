"""What a worker's loop, its attempts and its async runner share of its progress and limits.

A worker exits after ``max_jobs`` jobs, or after the job that left its process
above ``max_memory_mb`` of RSS (``--max-jobs``, ``--max-memory``: a supervised
child is then replaced by a fresh one), and starts no more jobs once a stop was
requested.
"""

from __future__ import annotations

from dataclasses import dataclass

from .process import rss_mb


@dataclass
class Limits:
    """What a worker's loop and its async runner share of the worker's progress."""

    #: Exit after that many jobs (``None``: no limit).
    max_jobs: int | None
    #: Exit after the job that left this process above that RSS, in MiB (``None``: no limit).
    max_memory_mb: float | None = None
    #: Jobs run so far.
    processed: int = 0
    #: A stop was requested: start no more jobs.
    stopping: bool = False

    def exit_reason(self, processed: int) -> str | None:
        """Why the worker must exit once it has run ``processed`` jobs, or ``None``."""
        if self.max_jobs is not None and processed >= self.max_jobs:
            return f"ran {processed} job(s), exiting (--max-jobs)"
        if self.max_memory_mb is not None and (rss := rss_mb()) > self.max_memory_mb:
            return f"RSS {rss:.0f} MiB > {self.max_memory_mb:.0f} MiB, exiting (--max-memory)"
        return None
