"""A worker process's identity and memory: its id and its resident set size.

Linux first (``/proc``), with a portable fallback. The master's process control
(death signal, group kills) is :mod:`django_rqueue.master.process`.
"""

from __future__ import annotations

import os
import socket
import uuid


def new_worker_id() -> str:
    """``"<host>:<pid>:<6 random hex digits>"``: unique per worker process."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def rss_mb() -> float:
    """This process's resident set size in MiB (``/proc/self/statm``; peak RSS elsewhere)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            pages = int(statm.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
