"""The worker processes: a child's reserve-run-report loop, and the poller.

:mod:`.loop` (a child's reserve-run-report loop, :class:`Worker`, which also runs
in-process), :mod:`.hooks` (the child-master contract), :mod:`.cancelling` (the
cancel pipe, master to child), :mod:`.prefetch` (jobs reserved ahead of their
run), :mod:`.reporting` (acks, failures and hand-backs, for the loop and the
master alike), :mod:`.reconnect` (retry delays while Redis is unreachable),
:mod:`.lease` (lease renewal in-process), :mod:`.poller` (promotes due jobs,
reclaims expired leases), :mod:`.heartbeat` (the registry of live workers: the
reader side), :mod:`.weights` (strict or weighted queue order), :mod:`.settings`
(what a worker serves, passed from the master to each child) and :mod:`.process`
(ids, memory). The prefork master that runs them is :mod:`django_rqueue.master`.
"""

from __future__ import annotations

from .loop import Worker

__all__ = ["Worker"]
