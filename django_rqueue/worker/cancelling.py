"""Stopping a running job whose cancel was asked (``Job.cancel()`` while it runs).

``cancel.lua`` only records the request in the job (field ``cx``). The master
of the worker running it looks for requests every :data:`POLL` seconds while
its children run jobs (one pipelined ``HGET`` per running job and Redis), and
for each one found:

1. **soft**: writes the job id to the child's *cancel pipe* (master to
   child, one per child) and sends the child ``SIGUSR2``. A sync job gets
   :class:`~django_rqueue.exceptions.JobCancelled` raised where it runs (the
   signal handler reads the pipe and raises only when the id is the job the
   child runs, so a late request never hits the next job); an async job's
   attempt is cancelled on its event loop (``asyncio.CancelledError`` in the
   coroutine), which reads the pipe as its own reader. The child reports the
   attempt with ``cancel_running.lua``: the job ends ``cancelled``, not retried.
2. **hard**: if the job still runs ``RQUEUE["TIMEOUT_GRACE"]`` seconds later
   (it caught the exception, or sits in C code), the master kills the child's
   process group, ends the job ``cancelled`` itself, hands the child's other
   jobs back unspent and forks a new child (as for a hard timeout).

Only workers under ``rqueue_work``'s master stop running jobs; the in-process
:class:`~.loop.Worker` has no master and runs them to the end.
"""

from __future__ import annotations

import logging
import os
import signal

logger = logging.getLogger("django_rqueue.worker")

#: Seconds between a master's looks for cancel requests while its children run jobs.
POLL = 1.0
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
