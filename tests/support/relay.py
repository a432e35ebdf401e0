"""Worker bursts with the pollers' relay in between, in this process, for the workflow tests.

:func:`run_until_settled` runs a burst of a worker on the queues, then the relay of
``worker/relay.py`` (what a poller runs when a queue's outbox has entries) on every queue
until no outbox has anything left, and again, until a relay finds nothing to move: on the
outbox path, every job that could run has run.
"""

from __future__ import annotations

from collections.abc import Sequence

from django_rqueue.conf import get_config
from django_rqueue.worker.outages import Outages
from django_rqueue.worker.relay import Relay


def relay_all(queues: Sequence[str] | None = None) -> int:
    """The relay on each queue (every declared one by default) until every outbox is empty
    (its own releases may write more); return the entries it applied."""
    names = list(queues) if queues is not None else list(get_config().queues)
    relay = Relay("tests", Outages())
    total = 0
    for _round in range(20):
        moved = 0
        for queue in names:
            while True:
                done = relay.relay(queue)
                moved += done.read
                total += done.applied
                if not done.full:
                    break
        if not moved:
            return total
    raise AssertionError("the outboxes never emptied")


def run_until_settled(queues: Sequence[str] = ("default", "emails"), rounds: int = 20) -> None:
    """Worker bursts on ``queues`` (in this process), each followed by :func:`relay_all`,
    until a relay finds nothing to move: every job that could run has run."""
    from tests.support.inprocess import run_worker  # imports the worker: only when used

    for _round in range(rounds):
        run_worker(queues, burst=True)
        if not relay_all(queues):
            return
    raise AssertionError(f"still relaying after {rounds} worker bursts")
