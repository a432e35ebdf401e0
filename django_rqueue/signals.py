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


def send(signal: Signal, sender: object, **kwargs: Any) -> None:
    """Send ``signal`` robustly, logging (not raising) what receivers raise."""
    _log_errors(signal.send_robust(sender, **kwargs))


async def asend(signal: Signal, sender: object, **kwargs: Any) -> None:
    """:func:`send` from async code: sync receivers run in ``sync_to_async``'s thread
    (where they may use the ORM), async ones on the event loop (Django's ``asend_robust``)."""
    _log_errors(await signal.asend_robust(sender, **kwargs))


def _log_errors(responses: list[tuple[Any, Any]]) -> None:
    for receiver, response in responses:
        if isinstance(response, BaseException):
            logger.error(
                "signal receiver %r raised",
                receiver,
                exc_info=(type(response), response, response.__traceback__),
            )
