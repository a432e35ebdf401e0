"""django-rqueue: a Redis task queue for Django that does not lose jobs.

Public API::

    from django_rqueue import job, get_job, aget_job, Job, JobStatus, JobContext, Retry, Reject
    from django_rqueue import CancelReason

See the README for settings and commands, ``docs/explanation/data-model.md`` for the Redis
key schema.
"""

from __future__ import annotations

from .context import JobContext
from .decorators import (
    AsyncContextJobFunction,
    AsyncJobFunction,
    ContextJobFunction,
    JobFunction,
    job,
)
from .exceptions import (
    EnqueueIncomplete,
    JobCancelled,
    JobStateError,
    JobTimeout,
    LeaseLost,
    NotReplicated,
    RedisAuthenticationFailed,
    RedisPermissionDenied,
    RedisUnavailable,
    Reject,
    Retry,
    RqueueError,
    SlotMoving,
    UnknownJob,
)
from .job import CancelReason, Job, JobStatus, aget_job, get_job

__all__ = [
    "AsyncContextJobFunction",
    "AsyncJobFunction",
    "CancelReason",
    "ContextJobFunction",
    "EnqueueIncomplete",
    "Job",
    "JobCancelled",
    "JobContext",
    "JobFunction",
    "JobStateError",
    "JobStatus",
    "JobTimeout",
    "LeaseLost",
    "NotReplicated",
    "RedisAuthenticationFailed",
    "RedisPermissionDenied",
    "RedisUnavailable",
    "Reject",
    "Retry",
    "RqueueError",
    "SlotMoving",
    "UnknownJob",
    "aget_job",
    "get_job",
    "job",
]
