"""``manage.py rqueue_resume <queue>``: let a paused queue hand out jobs again."""

from __future__ import annotations

from django_rqueue.management.base import QueueSwitchCommand
from django_rqueue.ops.operations import resume_queue


class Command(QueueSwitchCommand):
    """The ``rqueue_resume`` command."""

    help = "Resume a paused queue: its idle workers are woken and take its queued jobs at once."
    switch = staticmethod(resume_queue)
    changed = "Queue {queue!r} resumed."
    unchanged = "Queue {queue!r} was not paused."
