"""Process control of the master and its children: death signal, signals, group kills.

Linux first (``prctl``), with portable fallbacks where one exists.
"""

from __future__ import annotations

import ctypes
import os
import signal

#: ``prctl`` option: the signal this process gets when its parent dies (``<sys/prctl.h>``).
_PR_SET_PDEATHSIG = 1


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
