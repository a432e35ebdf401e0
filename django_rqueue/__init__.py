"""django-rqueue: a Redis task queue for Django that does not lose jobs.

Public API::

    from django_rqueue import job, get_job, Job, JobStatus

See the README for settings and commands, ``docs/design.md`` for the Redis key schema.
"""

from __future__ import annotations

from .decorators import JobFunction, job
from .exceptions import (
    JobStateError,
    JobTimeout,
    LeaseLost,
    RedisUnavailable,
    RqueueError,
    UnknownJob,
)
from .job import Job, JobStatus, get_job

__all__ = [
    "Job",
    "JobFunction",
    "JobStateError",
    "JobStatus",
    "JobTimeout",
    "LeaseLost",
    "RedisUnavailable",
    "RqueueError",
    "UnknownJob",
    "get_job",
    "job",
]
