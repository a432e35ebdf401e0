"""Periodic jobs: the ``SCHEDULE`` entries and their ticks, and those entries at run time.

Nothing is imported here: :mod:`django_rqueue.conf` reads
:mod:`~django_rqueue.periodic.entries` while :mod:`~django_rqueue.periodic.runtime`
enqueues through the layers above ``conf``. The poller's
:class:`~django_rqueue.worker.scheduler.Scheduler` claims the ticks.
"""
