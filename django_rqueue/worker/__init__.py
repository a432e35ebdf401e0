"""The worker processes behind ``manage.py rqueue_work`` and ``rqueue_poller``.

:mod:`.supervisor` (the prefork master), :mod:`.children` (the master's record
of a child and the pipe between them), :mod:`.loop` (a child's reserve-run-report
loop, :class:`Worker`, which also runs in-process), :mod:`.reporting` (acks,
failures and hand-backs, for the loop and the master alike), :mod:`.lease`
(lease renewal in-process), :mod:`.poller` (promotes due jobs, reclaims expired
leases) and :mod:`.heartbeat` (the registry of live workers).
"""

from __future__ import annotations

from .loop import Worker

__all__ = ["Worker"]
