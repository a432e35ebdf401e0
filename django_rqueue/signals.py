"""Signals sent as jobs move through their lifecycle, and when a worker loses Redis.

The five job signals are sent with the ``@job`` function object (a
:class:`~django_rqueue.job_functions.JobFunction`) as ``sender`` (``None`` for a
job whose name no ``@job`` registered), so a receiver can listen to one job
only: ``@receiver(job_failed, sender=send_invoice)``. Each is sent in the
process that runs the job: a worker's child, or the worker's master for an
attempt it failed itself (a hard timeout, a child that died); the caller's
process for ``job_enqueued`` and in EAGER mode.

Receivers are called with ``send_robust``: one that raises is logged on the
``django_rqueue`` logger and never breaks a worker or an enqueue. Receivers of
an ``async def`` job's signals may be ``async def`` themselves (they run on the
job's event loop); sync ones then run in ``sync_to_async``'s thread, where they
may use the ORM.

The two Redis signals are sent by each worker's master process (``rqueue_work``)
with the worker id (a ``str``) as ``sender``, once per outage, so a receiver
can mail or page someone. The master notices an outage when it next talks to
Redis: at once for a worker with running jobs (lease renewals), else at its
next heartbeat (every few seconds), or at startup. A receiver runs in the
master's loop: keep it short (a mail through Django's backend is fine; a slow
one delays lease renewals by as long as it takes).

The two process signals (``worker_process_init``, ``worker_process_shutdown``) are
sent by ``rqueue_work``'s processes with the worker id (a ``str``) as ``sender``
and a :class:`ProcessRole` saying which process sends it: set up, and flush,
what does not survive a ``fork()`` (OpenTelemetry's exporters, Sentry's
transport), as Celery's signals of the same names are used.
"""

from __future__ import annotations

import enum
import logging
from typing import Any

from django.dispatch import Signal

logger = logging.getLogger("django_rqueue")

#: A job was created: by ``.delay()``, ``adelay()``, ``delay_many()`` (once per
#: job), a periodic tick or "run now", or a ``django.tasks`` ``enqueue()``. Keyword
#: argument: ``job`` (the :class:`~django_rqueue.job.Job`). Sent in the enqueueing
#: process once the job is written: inside ``transaction.atomic()``, at the commit.
#: Not sent when the enqueue returned an existing job (a held ``unique_key``, a
#: ``job_id`` already used), nor for a staff retry of a failed job.
job_enqueued = Signal()
#: An attempt starts, in the process that runs it, before the function is called.
#: Keyword argument: ``job`` (its ``attempts`` already counts this attempt).
job_started = Signal()
#: An attempt succeeded and its result was stored. Keyword arguments: ``job``,
#: ``result`` (the return value as read back from JSON: a tuple comes back a list).
job_succeeded = Signal()
#: An attempt failed and the job will run again after its backoff. Keyword
#: arguments: ``job``, ``exception`` (the exception raised), ``traceback`` (a
#: ``str``), ``delay`` (seconds until the next attempt, a ``float``).
job_retrying = Signal()
#: The job's last attempt failed (or it raised :class:`~django_rqueue.Reject`): it
#: is now in the failed store. Keyword arguments: ``job``, ``exception``,
#: ``traceback`` (a ``str``). Not sent for a job failed by a poller because its
#: worker was lost on its last attempt (its lease expired): the
#: ``rqueue_jobs_failed_total`` metric counts those too.
job_failed = Signal()
#: A workflow ended (``django_rqueue.workflows``): every node ended, after its retries.
#: Sender: the :class:`~django_rqueue.workflows.Workflow` class. Keyword arguments:
#: ``workflow`` (the :class:`~django_rqueue.workflows.Workflow`, as its record reads at
#: the end) and ``state`` (its :class:`~django_rqueue.workflows.WorkflowState`:
#: ``succeeded``, ``failed`` or ``cancelled``). Sent by the worker that runs the
#: workflow's finisher job, once per finish (``retry_failed()`` starts another); twice
#: only if that worker is killed between the send and noting it (the at-least-once of
#: ``job_succeeded``). Not sent when the finisher itself was lost (cancelled, deleted).
workflow_finished = Signal()
#: A worker's master could not reach Redis, for the first time in this outage (at
#: startup or while running). Sender: the worker id. Keyword arguments:
#: ``worker_id``, ``error`` (the :class:`~django_rqueue.RedisUnavailable`),
#: ``since`` (an aware UTC ``datetime``: the first failure).
redis_unavailable = Signal()
#: The master reached Redis again after a ``redis_unavailable``. Sender: the worker
#: id. Keyword arguments: ``worker_id``, ``downtime`` (seconds, a ``float``, from
#: the first failure to the first success).
redis_recovered = Signal()


class ProcessRole(enum.StrEnum):
    """Which process of ``rqueue_work`` sends a process signal (its ``role`` argument)."""

    #: The master: it forks, supervises and replaces the children and runs no job.
    MASTER = "master"
    #: A worker child: it reserves and runs jobs.
    CHILD = "child"
    #: The poller child: it promotes due jobs and enqueues the periodic entries' runs (so
    #: ``RQUEUE["MIDDLEWARE"]``'s enqueue hooks run there); it runs no job.
    POLLER = "poller"


#: A process of ``rqueue_work`` starts. Sender: the process's worker id (the
#: master's, or ``"<master id>/<pid>"`` for a child). Keyword arguments: ``role``
#: (a :class:`ProcessRole`) and ``pid`` (an ``int``). In each worker child
#: (``role="child"``) right after the ``fork()``, once per child (and per replacement
#: child), before it reserves its first job: set up there what must not be
#: inherited through a ``fork()`` (OpenTelemetry's ``BatchSpanProcessor``, whose
#: thread does not survive it). In the master (``role="master"``) once at startup,
#: once Redis answered and the jobs modules were imported, before the first
#: ``fork()``: children inherit what its receivers set up, so threads started there
#: do not run in the children. In the poller child (``role="poller"``) once after
#: its fork: it enqueues the runs of periodic entries. Not sent by a
#: :class:`~django_rqueue.worker.Worker` run in the calling process, nor by
#: ``rqueue_poller`` (a test, a script, a command: that process was set up by whoever
#: started it). A receiver that raises is logged; the process goes on.
worker_process_init = Signal()
#: A process of ``rqueue_work`` is about to exit. Sender and keyword arguments as
#: ``worker_process_init``'s (``role``, ``pid``), plus ``exitcode`` (an ``int``, 0
#: for a clean exit). Flush exporters here. In a worker child before it exits by
#: any path it still controls: recycled (``--max-jobs``, ``--max-memory``), stopped
#: (SIGTERM/SIGINT to the master, ``rqueue_restart``, the end of a ``--burst``), or
#: crashed (an exception in the worker loop). In the poller child only when it
#: crashed: at a stop the master kills it (SIGKILL). Not sent by a child the master
#: SIGKILLs (its job overran its hard timeout, or its cancel or its lease ran out,
#: or ``--shutdown-timeout`` ran out), nor by one killed from outside (SIGKILL, the
#: out-of-memory killer, its master dying): nothing runs in a SIGKILLed process. In
#: the master once every child has exited, before it exits (or re-executes itself
#: for ``rqueue_restart``). Receivers run in a thread, with at most 10 seconds
#: for all of them: the process exits then even if one still runs (it is logged).
#: At a stop, a child's receivers count against ``--shutdown-timeout``.
worker_process_shutdown = Signal()


def send(signal: Signal, sender: object, **kwargs: Any) -> None:
    """Send ``signal`` robustly, logging (not raising) what receivers raise."""
    if not signal.receivers:  # the common case, on every .delay(): Django's own first test
        return
    _log_errors(signal.send_robust(sender, **kwargs))


async def asend(signal: Signal, sender: object, **kwargs: Any) -> None:
    """:func:`send` from async code: sync receivers run in ``sync_to_async``'s thread
    (where they may use the ORM), async ones on the event loop (Django's ``asend_robust``)."""
    if not signal.receivers:  # as send(): nothing to schedule
        return
    _log_errors(await signal.asend_robust(sender, **kwargs))


def _log_errors(responses: list[tuple[Any, Any]]) -> None:
    for receiver, response in responses:
        if isinstance(response, BaseException):
            logger.error(
                "signal receiver %r raised",
                receiver,
                exc_info=(type(response), response, response.__traceback__),
            )
