"""Signals sent as jobs move through their lifecycle.

Every signal is sent with the ``@job`` function object (a
:class:`~django_rqueue.decorators.JobFunction`) as ``sender`` — ``None`` for a
job whose name no ``@job`` registered — and in the process that runs the
job (the caller's process for ``job_enqueued`` and in EAGER mode). Receivers
are called with ``send_robust``: one that raises is logged on the
``django_rqueue`` logger and never breaks a worker.

=================  =====================================================
signal             keyword arguments
=================  =====================================================
``job_enqueued``   ``job``
``job_started``    ``job`` (``attempts`` already counts this attempt)
``job_succeeded``  ``job``, ``result`` (the decoded return value)
``job_retrying``   ``job``, ``exception``, ``traceback`` (str), ``delay``
                   (seconds until the next attempt, float)
``job_failed``     ``job``, ``exception``, ``traceback`` (str); final:
                   the job is now in the failed store
=================  =====================================================

Two more are about Redis, not a job, and are sent by each worker's master
process (``rqueue_work``; sender: the worker id, a ``str``), once per outage,
so a receiver can mail or page someone:

=====================  =================================================
signal                 keyword arguments
=====================  =================================================
``redis_unavailable``  ``worker_id``, ``error`` (the ``RedisUnavailable``),
                       ``since`` (aware UTC datetime of the first failure)
``redis_recovered``    ``worker_id``, ``downtime`` (seconds, float, from
                       the first failure to the first success)
=====================  =================================================

The master notices an outage when it next talks to Redis: at once for a
worker with running jobs (lease renewals), else at its next heartbeat (every
few seconds), or at startup. A receiver runs in the master's loop: keep it
short (a mail through Django's backend is fine; a slow one delays lease
renewals by as long as it takes).
"""

from __future__ import annotations

import logging
from typing import Any

from django.dispatch import Signal

logger = logging.getLogger("django_rqueue")

job_enqueued = Signal()
job_started = Signal()
job_succeeded = Signal()
job_retrying = Signal()
job_failed = Signal()
redis_unavailable = Signal()
redis_recovered = Signal()


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
