"""On-commit bookkeeping: which calls wait for the commit, and the unique keys they hold meanwhile.

Inside ``transaction.atomic()`` a call is handed to ``transaction.on_commit``
(unless its job function says ``on_commit=False``), so that it is written
when the outermost transaction commits and not at all on a rollback.

Unique keys inside a transaction: a call whose ``unique_key`` is held by a
job that waits for the same commit gets that job. The package keeps its own
record of the submissions waiting for commit (``_Pending``), one per
database connection, holding each submission *weakly*: Django holds the
on-commit callback, so a submission stays visible exactly as long as Django
would still run it. A rollback (of the transaction or of the savepoint it
was made in) makes Django drop the callback, and with it the submission;
Django's own list of callbacks is never read.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from ..engine.connection import as_text, get_client, redis_errors
from ..job import Job, JobStatus, get_job
from .plan import Submission
from .write import write_one

if TYPE_CHECKING:
    from ..types import JobSpec

#: States in which a job holds its unique key.
HOLDING = (JobStatus.SCHEDULED, JobStatus.QUEUED, JobStatus.RUNNING)


def deferred(job_function: JobSpec) -> bool:
    """Whether this call waits for the current transaction's commit."""
    return (
        job_function.options.on_commit is not False and transaction.get_connection().in_atomic_block
    )


def defer_until_commit(submission: Submission) -> Job[Any] | None:
    """Inside ``transaction.atomic()``: defer the write to the commit and return the Job (or
    the pending holder of its unique key). Outside (or ``on_commit=False``): ``None``."""
    if not deferred(submission.plan.job_function):
        return None
    holder = pending_holder(submission)
    if holder is not None:
        return holder
    defer(functools.partial(write_one, submission), [submission])
    return submission.job


def pending_holder(submission: Submission) -> Job[Any] | None:
    """The job already holding ``submission``'s unique key: in Redis, or waiting for this
    commit."""
    if not submission.unique_key:
        return None
    plan = submission.plan
    client = get_client(plan.queue)
    with redis_errors(client):
        holder = client.get(plan.keys.unique(submission.unique_key))
    if holder is not None:
        existing = get_job(as_text(holder))
        if existing and existing.status in HOLDING:
            return existing
    return _Pending.of_current().holder(plan.queue, submission.unique_key)


class _Pending:
    """The submissions of one database connection that wait for its commit, by unique key.

    Values are held weakly: the strong reference is the one Django keeps for
    the on-commit callback, so an entry disappears when Django runs the
    callback (commit) or drops it (rollback of the transaction or of the
    savepoint the call was made in). CPython frees them at once (reference
    counting; the submissions hold no reference cycle).
    """

    _by_connection: weakref.WeakKeyDictionary[BaseDatabaseWrapper, _Pending] = (
        weakref.WeakKeyDictionary()
    )

    def __init__(self) -> None:
        self.by_key: weakref.WeakValueDictionary[tuple[str, str], Submission] = (
            weakref.WeakValueDictionary()
        )

    @classmethod
    def of_current(cls) -> _Pending:
        connection = transaction.get_connection()
        pending = cls._by_connection.get(connection)
        if pending is None:
            pending = cls._by_connection[connection] = cls()
        return pending

    def holder(self, queue: str, unique_key: str) -> Job[Any] | None:
        submission = self.by_key.get((queue, unique_key))
        return None if submission is None else submission.job

    def add(self, submissions: Iterable[Submission]) -> None:
        for submission in submissions:
            if submission.job.unique_key:
                self.by_key[submission.job.queue, submission.job.unique_key] = submission


def defer(callback: Callable[[], object], submissions: Iterable[Submission]) -> None:
    """Run ``callback`` when the current transaction commits; remember its unique keys."""
    transaction.on_commit(callback)
    _Pending.of_current().add(submissions)
