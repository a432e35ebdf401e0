"""Exceptions raised by django-rqueue.

Every error the package raises on purpose derives from :class:`RqueueError`,
except argument validation, which raises the built-in ``ValueError`` /
``TypeError`` as Python code expects.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any


class RqueueError(Exception):
    """Base class of every django-rqueue exception."""


class RedisUnavailable(RqueueError):  # noqa: N818 - reads like the condition it names
    """Redis could not be reached after a short bounded retry (about 2 s in all).

    Raised by ``.delay()``, ``get_job()`` and every call that must talk to
    Redis; also while a Redis Cluster slot of the queue is moving between
    masters (``TRYAGAIN``, ``TTL exhausted``: the command did not run).
    Nothing was written when it is raised by ``.delay()``: the caller decides
    whether to retry, fail the request, or fall back. ``.delay_many()``
    raises its subclass :class:`EnqueueIncomplete`, which says what was written.
    """


class SlotMoving(RedisUnavailable):
    """A Redis Cluster refused a command because the slot of its keys (a queue's) is moving
    between masters, or has no master for the moment (``TRYAGAIN``, ``ASK``/``MOVED``
    replies redis-py's cluster client gave up following: ``ClusterError: TTL exhausted``;
    an uncovered slot). The command did not run; it runs once the slot has settled.

    A :class:`RedisUnavailable` that concerns one queue: the other queues of the cluster
    are served meanwhile (a worker leaves only that queue out until its retry time).
    """


class RedisAuthenticationFailed(RedisUnavailable):
    """Redis answered but refused the credentials: a wrong or missing password or
    user (``WRONGPASS``, ``NOAUTH``).

    A :class:`RedisUnavailable`, so that existing ``except RedisUnavailable``
    clauses still catch it; raised where that is, at once (retrying cannot
    help). The fix is the user and password in the Redis URL
    (``redis://user:password@host:port/db``).
    """


class RedisPermissionDenied(RedisUnavailable):
    """Redis refused a command or a key to the user django-rqueue connects as (``NOPERM``):
    its ACL lacks a command django-rqueue sends, or its key patterns do not cover
    ``RQUEUE["KEY_PREFIX"]``.

    A :class:`RedisUnavailable`, as :class:`RedisAuthenticationFailed`: callers that
    handle an outage handle it (the admin and the metrics view show the server as
    unavailable, workers back off and retry), and it is raised at once. The message
    names the server and Redis's reason; the fix is the user's ACL (the documentation's
    "Secure it" how-to gives the rules django-rqueue needs).
    """


class EnqueueIncomplete(RedisUnavailable):
    """``.delay_many()`` wrote part of its jobs and could not write the rest.

    ``delay_many`` writes its jobs in batches, each atomically, and sends a
    batch again through a transient failure (Redis unreachable for a moment,
    a Redis Cluster slot moving: :class:`RedisUnavailable`) with the same job
    ids, which Redis does not write twice. When the failure outlasts that
    retry (``django_rqueue.enqueue.write.ENQUEUE_PATIENCE`` seconds), or cannot
    heal (refused credentials), it raises this, with the jobs of the call split
    by what Redis holds, each list in call order (a call whose unique key an
    earlier call of the same ``delay_many`` holds appears with that job):

    - ``written``: in Redis; they run as any job.
    - ``not_written``: not in Redis; enqueue them again (``delay_many`` of their calls).
    - ``unknown``: sent, but Redis could not be asked afterwards whether they were
      written (empty unless Redis became unreachable): look them up with
      ``get_job(job.id)`` once Redis answers.

    ``jobs`` is every Job of the call, in call order. The cause (a
    :class:`RedisUnavailable`) is chained as ``__cause__``. A
    :class:`RedisUnavailable`, so existing ``except RedisUnavailable``
    clauses still catch it; ``.delay_many()`` raises it for every such failure of
    its write (``written`` may be empty). Inside ``transaction.atomic()`` it is
    raised by the on-commit write, after the commit.
    """

    # Each list holds :class:`~django_rqueue.job.Job` objects, typed ``Any`` because this
    # module is below :mod:`django_rqueue.job`, which raises its exceptions.

    def __init__(
        self,
        jobs: Sequence[Any],
        written: Sequence[Any],
        not_written: Sequence[Any],
        unknown: Sequence[Any],
        cause: BaseException,
    ) -> None:
        self.jobs: list[Any] = list(jobs)
        self.written: list[Any] = list(written)
        self.not_written: list[Any] = list(not_written)
        self.unknown: list[Any] = list(unknown)
        maybe = f", {len(self.unknown)} unknown" if self.unknown else ""
        super().__init__(
            f"delay_many wrote {len(self.written)} of its {len(self.jobs)} job(s) "
            f"({len(self.not_written)} not written{maybe}): {cause}"
        )


class NotReplicated(RqueueError):  # noqa: N818 - reads like the condition it names
    """Fewer than ``RQUEUE["MIN_REPLICAS_ACK"]`` replicas confirmed an enqueued job in time.

    Raised by ``.delay()``, ``.adelay()``, ``.delay_many()`` and the
    ``django.tasks`` backend's ``enqueue()`` when the ``WAIT`` sent after the
    write got fewer replica acknowledgements than required within
    ``RQUEUE["MIN_REPLICAS_TIMEOUT"]`` seconds. The jobs **were** written to
    the Redis master (and announced by ``job_enqueued``): they run like any
    other unless the master fails before replicating them, and then they are
    lost.
    The caller decides: accept that, enqueue again later (a second job, so a
    second run if the first survives), or cancel them (``get_job(id).cancel()``).

    ``job_ids``: the jobs written and not confirmed (with ``delay_many``, those
    of the first batch that was not confirmed: earlier batches were, later
    ones were not written). ``acked``: how many replicas confirmed (0 when
    unknown). ``required``: ``MIN_REPLICAS_ACK``. ``timeout``: seconds waited.
    Inside ``transaction.atomic()`` it is raised by the on-commit write, after
    the commit, as Django raises an on-commit callback's exception.
    """

    def __init__(self, job_ids: Sequence[str], acked: int, required: int, timeout: float) -> None:
        self.job_ids = list(job_ids)
        self.acked = acked
        self.required = required
        self.timeout = timeout
        shown = ", ".join(self.job_ids[:3]) + (", ..." if len(self.job_ids) > 3 else "")
        super().__init__(
            f"{len(self.job_ids)} job(s) ({shown}) written to the Redis master, but only "
            f"{acked} of the {required} replica(s) RQUEUE['MIN_REPLICAS_ACK'] requires "
            f"acknowledged them within {timeout:g} s; they are lost if the master fails "
            "before replicating them"
        )


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


class WorkflowStateError(RqueueError):
    """An action does not apply to the workflow's current state.

    Raised by ``Workflow.cancel()`` on a workflow that has finished (succeeded, failed
    or cancelled: as :class:`JobStateError` for ``Job.cancel()`` of a finished job), and
    by ``Workflow.retry_failed()`` on a workflow that is still running, has succeeded or
    was cancelled (it re-runs the failed nodes of a workflow that ended ``failed``), or
    whose records it needs (the failed nodes and the nodes they cancelled) have expired,
    which the message names. ``Job.retry()`` of a node of a workflow raises
    :class:`JobStateError` instead, naming the workflow.

    ``workflow_id``: the workflow's id. ``state``: the state found in Redis (a
    ``WorkflowState`` value), or ``None`` when the workflow's record no longer exists.
    """

    def __init__(self, message: str, workflow_id: str, state: str | None) -> None:
        super().__init__(message)
        self.workflow_id = workflow_id
        self.state = state


class WorkflowNotCreated(RedisUnavailable):
    """A workflow's ``.delay()`` could not complete its writes (or ``.delay()`` of a job
    with ``using(depends_on=...)``, which is written the same way).

    A workflow is written whole or not at all: its nodes cannot run before its commit
    point (one ``MULTI`` on one Redis server or Cluster slot; in several steps otherwise,
    where the commit is one write of its record). Transient failures (Redis unreachable
    for a moment, a Cluster slot moving) are retried for
    ``django_rqueue.enqueue.write.ENQUEUE_PATIENCE`` seconds; after that, or when the
    pollers rolled back a creation that took longer than its grace, ``.delay()`` raises
    this, and ``committed`` says where it stopped:

    - ``False``: nothing of the workflow runs, and whatever was written is removed (by the
      pollers, within about two minutes); enqueue it again (a new workflow, new ids).
    - ``True``: the commit point was reached: the workflow exists and will run, and the
      pollers finish its creation; do **not** enqueue it again
      (``get_workflow(workflow_id)`` finds it once Redis answers).

    The cause (a :class:`RedisUnavailable`, or ``None`` for a rolled-back creation) is
    chained as ``__cause__``. A :class:`RedisUnavailable`, so existing ``except
    RedisUnavailable`` clauses still catch it. Inside ``transaction.atomic()`` it is
    raised by the on-commit write, after the commit.
    """

    def __init__(self, workflow_id: str, committed: bool, reason: str) -> None:
        self.workflow_id = workflow_id
        self.committed = committed
        outcome = (
            "was committed and will run, but its creation could not be confirmed"
            if committed
            else "was not created (nothing of it runs)"
        )
        super().__init__(f"workflow {workflow_id} {outcome}: {reason}")


class JobTimeout(RqueueError):  # noqa: N818
    """Raised inside a running job when it reaches its ``timeout`` (soft timeout)."""


class JobCancelled(RqueueError):  # noqa: N818
    """Raised inside a running job whose cancel was asked (``Job.cancel()``, the admin's
    cancel button): the soft stop. A job that does not stop within ``RQUEUE["TIMEOUT_GRACE"]``
    seconds has its worker child killed (the hard stop). Either way the job ends
    ``cancelled`` and is not retried. An ``async def`` job gets ``asyncio.CancelledError``
    instead, as from ``asyncio.timeout``."""


class UnknownJob(RqueueError):  # noqa: N818
    """A worker reserved a job whose name no ``@job`` in this process registered."""


class UnknownEntry(RqueueError, LookupError):  # noqa: N818
    """No entry of that name in ``RQUEUE["SCHEDULE"]``."""


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


class Retry(RqueueError):  # noqa: N818 - raised as an instruction, like StopIteration
    """Raised inside a job: end this attempt and run the job again after ``delay``.

    ``delay`` is seconds (``int``/``float`` >= 0) or a ``datetime.timedelta``;
    ``None`` lets the job's backoff policy decide, as for any failure. The
    attempt counts: with no attempt left the job goes to the failed store,
    its error saying that it asked for a retry with none left.

    Raises:
        ValueError: ``delay`` is negative or not a number / ``timedelta``.
    """

    def __init__(self, delay: float | datetime.timedelta | None = None, reason: str = "") -> None:
        if isinstance(delay, datetime.timedelta):
            delay = delay.total_seconds()
        number = isinstance(delay, int | float) and not isinstance(delay, bool)
        if delay is not None and not (number and 0 <= delay < float("inf")):
            raise ValueError(f"Retry delay must be finite seconds >= 0 or a timedelta: {delay!r}")
        #: Seconds before the next attempt, or ``None`` (the backoff policy decides).
        self.delay: float | None = None if delay is None else float(delay)
        self.reason = reason
        when = "after the backoff delay" if self.delay is None else f"in {self.delay:g} s"
        super().__init__(f"retry requested {when}" + (f": {reason}" if reason else ""))


class Reject(RqueueError):  # noqa: N818
    """Raised inside a job: send it to the failed store now, without retries.

    ``reason`` is the message of the stored error.
    """

    def __init__(self, reason: str = "") -> None:
        self.reason = reason
        super().__init__(reason or "rejected by the job")
