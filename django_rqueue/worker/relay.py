"""The relay: a poller's delivery of a queue's outbox entries to the dependents' queues.

A job's end that must reach a dependent on another queue (an ``o`` edge, an ``i`` edge
to another queue, or the overflow of a long cascade: ``include/dep_notify.lua``) is
written to its own queue's outbox stream ``<queue>:outbox`` (fields ``d`` dependent id,
``x`` input index, ``v`` arrival value) with a wake-up token for the pollers. The poller
then calls :meth:`Relay.relay` for that queue: it reads a batch through the consumer
group :data:`GROUP` (``XREADGROUP``; the group is made on first use, so a queue without
workflows never gets one), applies the entries with one ``dep_apply.lua`` per dependent
queue, on that queue's client, and then acknowledges and deletes them on the source in
one ``MULTI`` (one key, so it holds under Redis Cluster too).

Exactly once: ``dep_apply.lua`` records an input once (a replayed entry is a duplicate),
and the consumer group hands each entry to one poller. An entry read by a poller that
died before its acknowledgement stays pending; any poller takes it over with
``XAUTOCLAIM`` once it has been idle for a lease (``RQUEUE["LEASE"]``). An entry whose
dependent's queue is not declared is logged at ERROR and dropped (no such dependent can
exist); one whose dependent's Redis is down stays pending
(:class:`~.outages.Outages`) and is tried again on a later round.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, Final, NamedTuple

import redis

from ..conf import get_config
from ..engine import dependency_commands, run
from ..engine.commands import Plain
from ..engine.connection import location_of
from ..engine.keys import queue_of
from ..engine.queue_ref import QueueRef, queue_ref
from ..exceptions import RedisUnavailable
from .outages import Outages

logger = logging.getLogger("django_rqueue.relay")

#: The consumer group of the pollers on every outbox stream.
GROUP: Final = "relay"
#: Entries read (or taken over) per call.
COUNT: Final = 200


class Entry(NamedTuple):
    """One outbox entry: the arrival of input ``input_index`` of ``dependent``."""

    entry_id: str
    dependent: str
    input_index: int
    value: str


class Relayed(NamedTuple):
    """What one :meth:`Relay.relay` call did with a queue's outbox."""

    #: Entries read or taken over by this call.
    read: int
    #: Arrivals recorded on waiting dependents (``dep_apply.lua``'s ``applied``).
    applied: int
    #: Entries that changed nothing (applied before: a re-delivery; or the dependent is gone).
    duplicates: int
    #: Entries dropped: malformed, or their dependent's queue is not declared.
    dropped: int
    #: Entries left pending: their dependent's Redis is down (tried again later).
    left: int
    #: A whole batch was read: more entries may be there (the poller comes back at once).
    full: bool


NOTHING = Relayed(0, 0, 0, 0, 0, False)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _entry(entry_id: bytes | str, fields: Any) -> Entry | str:
    """The :class:`Entry` of one stream entry, or its id alone when it is malformed (or its
    body was deleted: a pending entry that another poller acknowledged and deleted)."""
    eid = _text(entry_id)
    if not isinstance(fields, dict):
        return eid
    got = {_text(k): _text(v) for k, v in fields.items()}
    dependent, index, value = got.get("d"), got.get("x", ""), got.get("v")
    if dependent is None or value is None or not index.isdigit():
        return eid
    return Entry(eid, dependent, int(index), value)


def _stream(reply: Any) -> list[Entry | str]:
    """``XREADGROUP``'s reply (one stream) as entries (``[]``: nothing new)."""
    if not reply:
        return []
    if isinstance(reply, dict):  # RESP3
        batches = list(reply.values())
    else:
        batches = [stream[1] for stream in reply]
    return [_entry(eid, fields) for batch in batches for eid, fields in batch]


def _claimed(reply: Any) -> tuple[str, list[Entry | str]]:
    """``XAUTOCLAIM``'s reply: ``(where the next call goes on, the entries taken over)``
    (the deleted ones left the pending list)."""
    return _text(reply[0]), [_entry(eid, fields) for eid, fields in reply[1]]


class Relay:
    """Relays the outboxes of a poller's queues; ``consumer``: the poller's id (its name in
    the group), ``outages``: the poller's, shared so a dependent's Redis that is down is
    skipped by both; ``clock``: the time source of the take-over cadence."""

    def __init__(
        self,
        consumer: str,
        outages: Outages,
        *,
        count: int = COUNT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.consumer = consumer
        self.outages = outages
        self.count = count
        self._clock = clock
        #: Queue -> ``clock()`` of its next ``XAUTOCLAIM`` (at least once per lease).
        self._next_claim: dict[str, float] = {}
        #: Queue -> where its next ``XAUTOCLAIM`` goes on in the pending entries (``0-0``:
        #: from the oldest; Redis returns it there once a walk reached the end).
        self._claim_from: dict[str, str] = {}
        #: Queues where this consumer holds entries it could not apply (read them again).
        self._own_pending: set[str] = set()
        #: Totals over this relay's life (logs and tests).
        self.applied = 0
        self.duplicates = 0

    def relay(self, queue: str) -> Relayed:
        """Read one batch of ``queue``'s outbox, apply it, acknowledge and delete what was
        applied or dropped.

        Raises:
            RedisUnavailable: ``queue``'s own Redis cannot be reached (a dependent's Redis
                that cannot be reached only leaves its entries pending).
            redis.ResponseError: ``queue``'s outbox is not a stream.
        """
        ref = queue_ref(queue)
        client = ref.client()
        entries: list[Entry | str] = []
        if queue in self._own_pending:  # those first, then new ones: none waits behind them
            entries = self._read(client, ref, "0")
            if not entries:
                self._own_pending.discard(queue)
        new = self._read(client, ref, ">")
        entries += new
        full = len(new) >= self.count
        now = self._clock()
        if not entries or now >= self._next_claim.get(queue, 0.0):
            self._next_claim[queue] = now + ref.lease_ms / 1000
            seen = {e if isinstance(e, str) else e.entry_id for e in entries}
            for found in self._claim(client, ref):
                if (found if isinstance(found, str) else found.entry_id) not in seen:
                    entries.append(found)
        if not entries:
            return NOTHING
        done, applied, duplicates, left = self._apply(queue, entries)
        if done:
            outbox = ref.keys.outbox
            run.execute(
                client,
                Plain(
                    (("XACK", outbox, GROUP, *done), ("XDEL", outbox, *done)),
                    lambda _r: None,
                    transaction=True,
                ),
            )
        if left:
            self._own_pending.add(queue)
        self.applied += applied
        self.duplicates += duplicates
        dropped = len(done) - applied - duplicates
        return Relayed(len(entries), applied, duplicates, dropped, left, full)

    def _read(self, client: redis.Redis, ref: QueueRef, start: str) -> list[Entry | str]:
        """``XREADGROUP`` from ``start`` (``">"`` new entries, ``"0"`` this consumer's own
        pending ones); the group is created when missing."""
        command = (
            "XREADGROUP", "GROUP", GROUP, self.consumer, "COUNT", self.count,
            "STREAMS", ref.keys.outbox, start,
        )  # fmt: skip
        for _attempt in range(2):
            try:
                return run.execute(client, Plain((command,), _stream))
            except redis.ResponseError as exc:
                if not str(exc).startswith("NOGROUP"):
                    raise
            if not self._create_group(client, ref):
                return []
        return []

    def _create_group(self, client: redis.Redis, ref: QueueRef) -> bool:
        """Create the group on the outbox (from its first entry); whether the stream exists."""
        create = ("XGROUP", "CREATE", ref.keys.outbox, GROUP, "0")
        try:
            run.execute(client, Plain((create,), lambda _r: None))
        except redis.ResponseError as exc:
            if str(exc).startswith("BUSYGROUP"):
                return True
            if "requires the key to exist" in str(exc):
                return False
            raise
        return True

    def _claim(self, client: redis.Redis, ref: QueueRef) -> list[Entry | str]:
        """Take over entries pending for longer than a lease (their reader died), walking
        the pending entries a batch at a time from where the last call stopped."""
        start = self._claim_from.get(ref.name, "0-0")
        command = (
            "XAUTOCLAIM", ref.keys.outbox, GROUP, self.consumer, ref.lease_ms, start,
            "COUNT", self.count,
        )  # fmt: skip
        try:
            cursor, found = run.execute(client, Plain((command,), _claimed))
        except redis.ResponseError as exc:
            if str(exc).startswith("NOGROUP"):  # nothing was ever read: nothing is pending
                return []
            raise
        self._claim_from[ref.name] = cursor
        return found

    def _apply(self, queue: str, entries: Sequence[Entry | str]) -> tuple[list[str], int, int, int]:
        """Apply ``entries`` per dependent queue: ``(ids to acknowledge, applied,
        duplicates, left pending)``."""
        done: list[str] = []
        by_queue: dict[str, list[Entry]] = {}
        declared = get_config().queues
        for entry in entries:
            if isinstance(entry, str):
                done.append(entry)
                continue
            target = queue_of(entry.dependent)
            if target is None or target not in declared:
                logger.error(
                    "queue %s: outbox entry %s is for %s, whose queue is not declared; dropped",
                    queue,
                    entry.entry_id,
                    entry.dependent,
                )
                done.append(entry.entry_id)
                continue
            by_queue.setdefault(target, []).append(entry)
        applied = duplicates = left = 0
        for target, batch in by_queue.items():
            server = location_of(target)
            if not self.outages.usable(server, target):
                left += len(batch)
                continue
            ref = queue_ref(target)
            triples = [(e.dependent, e.input_index, e.value) for e in batch]
            try:
                got = run.execute(ref.client(), dependency_commands.dep_apply(ref.keys, triples))
            except RedisUnavailable as exc:
                delay = self.outages.failed(server, queue=target, error=exc)
                logger.error(
                    "queue %s: relay to queue %s: %s; %d entries left for %.1f s",
                    queue,
                    target,
                    exc,
                    len(batch),
                    delay,
                )
                left += len(batch)
                continue
            except redis.ResponseError as exc:  # a corrupt structure there: kept, logged
                logger.error("queue %s: relay to queue %s refused: %s", queue, target, exc)
                left += len(batch)
                continue
            self.outages.recovered(server, target)
            done += [e.entry_id for e in batch]
            applied += got.applied
            duplicates += got.duplicates
        return done, applied, duplicates, left
