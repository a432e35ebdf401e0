"""Operating-system helpers of the worker processes: ids, memory, signals.

Linux first (``/proc``, ``prctl``), with portable fallbacks where one exists.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import uuid

#: ``prctl`` option: the signal this process gets when its parent dies (``<sys/prctl.h>``).
_PR_SET_PDEATHSIG = 1


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


def set_pdeathsig(signum: int = signal.SIGKILL) -> None:
    """Ask Linux to send ``signum`` to this process when its parent dies (no-op elsewhere)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signum)
    except (OSError, AttributeError):
        pass


def send_signal(pid: int, signum: int) -> None:
    """Send ``signum`` to ``pid``; a process already gone is not an error."""
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def kill_group(pid: int) -> None:
    """SIGKILL the process group led by ``pid`` (a child and anything its job started)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        send_signal(pid, signal.SIGKILL)
