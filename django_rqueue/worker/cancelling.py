"""The cancel pipe, master to child: how a master asks a worker child to stop a running job.

The master's cancel watch (:mod:`django_rqueue.master.cancels`) finds the
request ``Job.cancel()`` recorded in a running job and calls
:func:`send_request`: the job id goes down the child's cancel pipe (one per
worker child), then ``SIGUSR2`` (:data:`SIGNAL`). A sync job gets
:class:`~django_rqueue.exceptions.JobCancelled` raised where it runs (the
signal handler reads the pipe with :func:`read_requests` and raises only when
the id is the job the child runs, so a late request never hits the next job);
an async job's attempt is cancelled on its event loop (``asyncio.CancelledError``
in the coroutine), which reads the pipe as its own reader. The child reports the
attempt with ``cancel_running.lua``: the job ends ``cancelled``, not retried.

Only workers under ``rqueue_work``'s master stop running jobs; the in-process
:class:`~.loop.Worker` has no master and runs them to the end.
"""

from __future__ import annotations

import logging
import os
import signal

logger = logging.getLogger("django_rqueue.worker")

#: The signal that tells a child to read its cancel pipe.
SIGNAL = signal.SIGUSR2


def read_requests(fd: int) -> set[str]:
    """Read every job id waiting in the cancel pipe ``fd`` (non-blocking); ``set()`` if none."""
    data = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except (BlockingIOError, InterruptedError):
            break
        if not chunk:
            break
        data += chunk
    return {line for line in data.decode("utf-8", "replace").split("\n") if line}


def send_request(fd: int, pid: int, job_id: str) -> None:
    """Master side: tell child ``pid`` (its cancel pipe ``fd``) to stop ``job_id``."""
    try:
        os.write(fd, job_id.encode() + b"\n")
        os.kill(pid, SIGNAL)
    except (BlockingIOError, ProcessLookupError, BrokenPipeError) as exc:
        # A full pipe or a child already gone: the hard stop still comes at the deadline.
        logger.warning("cannot ask child %d to stop %s: %s", pid, job_id, exc)
