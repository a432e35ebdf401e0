"""The worker processes behind ``manage.py rqueue_work`` and ``rqueue_poller``.

:mod:`.supervisor` (the prefork master), :mod:`.children` (the master's record
of a child and the pipe between them), :mod:`.loop` (a child's reserve-run-report
loop, :class:`Worker`, which also runs in-process), :mod:`.prefetch` (jobs
reserved ahead of their run), :mod:`.reporting` (acks, failures and hand-backs,
for the loop and the master alike), :mod:`.reconnect` (retry delays while Redis
is unreachable), :mod:`.lease` (lease renewal in-process), :mod:`.poller`
(promotes due jobs, reclaims expired leases), :mod:`.heartbeat` (the registry of
live workers), :mod:`.weights` (strict or weighted queue order), :mod:`.settings`
(what a worker serves, passed from the master to each child) and :mod:`.process`
(ids, memory, signals).
"""

from __future__ import annotations

from .loop import Worker

__all__ = ["Worker"]
