"""``manage.py rqueue_pause <queue>``: stop a queue from handing out jobs."""

from __future__ import annotations

from django_rqueue.management.base import QueueSwitchCommand
from django_rqueue.ops.operations import pause_queue


class Command(QueueSwitchCommand):
    """The ``rqueue_pause`` command."""

    help = (
        "Pause a queue: it keeps accepting jobs (and the poller keeps queuing due ones) but "
        "no worker reserves any until rqueue_resume. Running jobs finish."
    )
    switch = staticmethod(pause_queue)
    changed = "Queue {queue!r} paused: workers reserve none of its jobs."
    unchanged = "Queue {queue!r} was already paused."
