"""A relay by hand for tests: what the pollers' outbox relay will do, between worker bursts.

Until ``worker/relay.py`` runs in the pollers, tests of the outbox path call
:func:`relay_all` between two worker bursts: every queue's outbox entries are applied on
their dependent's queue (``dep_apply.lua``), then deleted.
"""

from __future__ import annotations

from collections.abc import Sequence

import redis

from django_rqueue.conf import get_config
from django_rqueue.engine import dependency_commands
from django_rqueue.engine.connection import get_client
from django_rqueue.engine.keys import QueueKeys, queue_of
from django_rqueue.engine.run import execute


def relay_queue(queue: str) -> int:
    """Apply and delete ``queue``'s outbox entries; return how many there were."""
    prefix = get_config().key_prefix
    source = QueueKeys.of(prefix, queue)
    client: redis.Redis = get_client(queue)
    entries: list[tuple[bytes, dict[bytes, bytes]]] = client.xrange(source.outbox)  # type: ignore[assignment]
    by_queue: dict[str, list[tuple[str, int, str]]] = {}
    for _entry_id, f in entries:
        dependent = f[b"d"].decode()
        by_queue.setdefault(queue_of(dependent) or "", []).append(
            (dependent, int(f[b"x"]), f[b"v"].decode())
        )
    for target, triples in by_queue.items():
        keys = QueueKeys.of(prefix, target)
        execute(get_client(target), dependency_commands.dep_apply(keys, triples))
    if entries:
        client.xdel(source.outbox, *[entry_id for entry_id, _f in entries])
    return len(entries)


def relay_all(queues: Sequence[str] | None = None) -> int:
    """:func:`relay_queue` for each queue (every declared one by default), until every
    outbox is empty (the relay's own releases may emit more); return the entries applied."""
    names = list(queues) if queues is not None else list(get_config().queues)
    total = 0
    for _round in range(20):
        moved = sum(relay_queue(q) for q in names)
        total += moved
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
