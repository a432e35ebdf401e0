"""Exceptions raised by django-rqueue.

Every error the package raises on purpose derives from :class:`RqueueError`,
except argument validation, which raises the built-in ``ValueError`` /
``TypeError`` as Python code expects.
"""

from __future__ import annotations


class RqueueError(Exception):
    """Base class of every django-rqueue exception."""


class RedisUnavailable(RqueueError):  # noqa: N818 - reads like the condition it names
    """Redis could not be reached after a short bounded retry (about 2 s in all).

    Raised by ``.delay()``, ``get_job()`` and every call that must talk to
    Redis. Nothing was written when it is raised by an enqueue: the caller
    decides whether to retry, fail the request, or fall back.
    """


class LeaseLost(RqueueError):  # noqa: N818
    """A renew, ack or fail carried a stale fencing token.

    The reservation was reclaimed (lease expired) and the job may now belong
    to another worker. Nothing was changed in Redis; the caller must discard
    its run.
    """


class JobStateError(RqueueError):
    """An action does not apply to the job's current state.

    For example ``retry()`` of a job that is not failed, or ``cancel()`` of a
    running job. ``state`` holds the state found in Redis (a ``JobStatus``
    value, or ``None`` when the job no longer exists).
    """

    def __init__(self, message: str, state: str | None) -> None:
        super().__init__(message)
        self.state = state


class JobTimeout(RqueueError):  # noqa: N818
    """Raised inside a running job when it reaches its ``timeout`` (soft timeout)."""


class UnknownJob(RqueueError):  # noqa: N818
    """A worker reserved a job whose name no ``@job`` in this process registered."""


class LeaseExpired(RqueueError):  # noqa: N818
    """Recorded as the error of an attempt whose worker stopped renewing its lease.

    Never raised in user code: the poller writes it when it reclaims the job.
    """


class WorkerLost(RqueueError):  # noqa: N818
    """Recorded as the error of an attempt whose worker process died while running it.

    The message names the signal or exit code ("worker process died (signal 9)").
    """


class StartupError(RqueueError):
    """``rqueue_work`` refused to start (Redis misconfigured); the message says how to fix it."""
