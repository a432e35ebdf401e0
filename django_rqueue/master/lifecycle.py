"""Sends the process signals of ``rqueue_work``'s master and worker children, the shutdown one
with a time bound.

``worker_process_init`` runs its receivers in the calling thread (a child takes no
job before they return); ``worker_process_shutdown`` runs them in a daemon thread
and waits at most :data:`SHUTDOWN_SIGNAL_TIMEOUT` seconds, so a receiver that hangs
(an exporter whose collector does not answer) cannot keep a process alive: a
child then goes on to ``os._exit``, which ends that thread too. Receivers that
raise are logged (``django_rqueue.signals.send``).
"""

from __future__ import annotations

import logging
import os
import threading

from .. import signals
from ..signals import ProcessRole

logger = logging.getLogger("django_rqueue.supervisor")

#: Seconds the receivers of ``worker_process_shutdown`` get, all together, before the
#: process exits anyway (Sentry's default flush timeout is 2 s; an OpenTelemetry
#: exporter's own export timeout is 10 s by default).
SHUTDOWN_SIGNAL_TIMEOUT = 10.0


def process_started(role: ProcessRole, worker_id: str) -> None:
    """Send ``worker_process_init`` for this process (``role``, ``worker_id`` as sender)."""
    signals.send(signals.worker_process_init, worker_id, role=role, pid=os.getpid())


def process_exiting(
    role: ProcessRole,
    worker_id: str,
    exitcode: int,
    *,
    timeout: float = SHUTDOWN_SIGNAL_TIMEOUT,
) -> bool:
    """Send ``worker_process_shutdown`` for this process and wait up to ``timeout`` seconds for
    its receivers; return whether they all returned in time (a late one is logged and left
    running in its daemon thread)."""
    if not signals.worker_process_shutdown.receivers:
        return True
    thread = threading.Thread(
        target=signals.send,
        args=(signals.worker_process_shutdown, worker_id),
        kwargs={"role": role, "pid": os.getpid(), "exitcode": exitcode},
        name="rqueue-process-shutdown",
        daemon=True,
    )
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        logger.error(
            "%s %d: worker_process_shutdown receivers still running after %g s; exiting anyway",
            role,
            os.getpid(),
            timeout,
        )
        return False
    return True
