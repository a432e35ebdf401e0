"""The worker processes behind ``manage.py rqueue_work`` and ``rqueue_poller``.

:mod:`.supervisor` (the prefork master), :mod:`.children` (the master's record
of a child and the pipe between them), :mod:`.loop` (a child's reserve-run-report
loop), :mod:`.poller` (promotes due jobs, reclaims expired leases) and
:mod:`.heartbeat` (the registry of live workers).
"""
