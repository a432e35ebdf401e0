"""The scheduler: the poller's duty of enqueuing periodic jobs (``RQUEUE["SCHEDULE"]``).

Leaderless: every poller runs one (the worker's and ``rqueue_poller``), for
the entries whose queue it polls. Each queue keeps a zset of its entries
scored by their next tick (ms, Redis clock). A round reads the due entries
(``schedule_due.lua``: O(log n + due), so 10 000 entries that are not due
cost nothing), computes each one's following tick here in Python (with
cronsim for cron entries), and claims the tick with ``schedule_claim.lua``:
a compare-and-set on the entry's score and the enqueue of its job in one
script. Of any number of pollers that read the same due tick exactly one
claims it; one killed at any point has claimed and enqueued, or neither.

Catch-up: the stored tick is the oldest not yet run. When it is claimed
long after it came (no poller ran for a while), the job runs once, for that
tick (its ``run_at``), and the next tick becomes the first one after now:
ticks missed while nothing ran give one catch-up run, not one per tick.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import redis

from .. import registry
from ..conf import get_config
from ..engine import commands, run
from ..engine.connection import redis_errors
from ..engine.keys import QueueKeys
from ..engine.queue_ref import queue_ref
from ..engine.replies import ClaimOutcome
from ..exceptions import RedisUnavailable, UnknownJob
from ..periodic import runtime
from ..periodic.runtime import ResolvedEntry

logger = logging.getLogger("django_rqueue.scheduler")

#: Due entries read (and claimed) per queue and script call.
BATCH = 500


class Scheduler:
    """Claim the due ticks of the periodic entries on ``queues`` (names)."""

    def __init__(self, queues: Sequence[str], *, batch: int = BATCH) -> None:
        self.queues = list(queues)
        self.batch = batch
        #: queue -> entry name -> entry; filled by :meth:`sync`.
        self.entries: dict[str, dict[str, ResolvedEntry]] | None = None
        #: The queues whose entries are stored in their Redis since the last (re)sync.
        self._stored: set[str] = set()

    def resync(self) -> None:
        """Store the entries in Redis again before the next round (after a Redis outage:
        a Redis that restarted empty lost them)."""
        self.entries = None
        self._stored.clear()

    def sync(self) -> None:
        """Resolve the entries of this poller's queues and store them in Redis.

        A new entry (or one whose ``cron``/``every``/``timezone`` changed)
        first runs at its next tick after now; a known one keeps its next
        tick, latest run and pause; entries no longer in the settings (or
        moved to another queue) are removed from this poller's queues. An
        entry whose job is unknown, or whose arguments do not fit it, is
        logged and not run. Without any entry in the settings nothing is
        sent to Redis (what earlier settings stored stays, unread).
        """
        registry.autodiscover()
        found: dict[str, dict[str, ResolvedEntry]] = {}
        for name, entry in get_config().schedule.items():
            try:
                resolved = runtime.resolve(entry)
            except (UnknownJob, ValueError, TypeError) as exc:
                logger.error("schedule entry %r is not run: %s", name, exc)
                continue
            if resolved.queue in self.queues:
                found.setdefault(resolved.queue, {})[name] = resolved
        self.entries = {queue: found.get(queue, {}) for queue in self.queues}
        self._stored.clear()
        if not get_config().schedule:
            self.entries = {}
            return
        failed: RedisUnavailable | None = None
        for queue in self.queues:
            try:
                self._store(queue)
            except RedisUnavailable as exc:  # that queue's Redis: stored at a later round
                logger.error("queue %s: periodic entries not stored yet: %s", queue, exc)
                failed = exc
        if failed is not None and not self._stored:
            raise failed

    def _store(self, queue: str) -> None:
        """Store ``queue``'s entries in its Redis (``schedule_sync.lua``).

        Raises:
            RedisUnavailable: its Redis cannot be reached (nothing stored).
        """
        assert self.entries is not None  # noqa: S101 - set by sync()
        entries = self.entries.get(queue, {})
        ref = queue_ref(queue)
        client = ref.client()
        with redis_errors(client):
            seconds, micros = client.time()
        now_ms = int(seconds) * 1000 + int(micros) // 1000
        stored = []
        for name, resolved in list(entries.items()):
            first = resolved.entry.next_tick_ms(now_ms)
            if first is None:
                logger.error("schedule entry %r has no tick in the next 50 years", name)
                del entries[name]
                continue
            stored.append((name, resolved.entry.spec, first))
        added, removed = run.execute(client, commands.schedule_sync(ref.keys, stored))
        logger.debug("queue %s: %d schedule entries set, %d removed", queue, added, removed)
        self._stored.add(queue)

    def run_once(self) -> float | None:
        """Claim every due tick; return seconds until the next tick (``None``: no entries).

        A queue whose Redis cannot be reached is skipped (logged; its entries are
        stored again once it answers) while the others are served.

        Raises:
            RedisUnavailable: no queue with entries could be served.
        """
        if self.entries is None:
            self.sync()
        assert self.entries is not None  # noqa: S101 - set by sync()
        sleep: float | None = None
        failed: RedisUnavailable | None = None
        ran = False
        for queue, entries in self.entries.items():
            try:
                if queue not in self._stored:
                    self._store(queue)
                if not entries:
                    continue
                seconds = self._run_queue(queue, entries)
            except RedisUnavailable as exc:  # this queue's Redis only: the others go on
                logger.error("queue %s: periodic entries not run: %s", queue, exc)
                self._stored.discard(queue)  # a Redis back from an outage may have lost them
                failed = exc
                continue
            ran = True
            if seconds is not None:
                sleep = seconds if sleep is None else min(sleep, seconds)
        if failed is not None and not ran:
            raise failed
        return sleep

    def _run_queue(self, queue: str, entries: dict[str, ResolvedEntry]) -> float | None:
        ref = queue_ref(queue)
        client, keys = ref.client(), ref.keys
        read = run.execute(client, commands.schedule_due(keys, self.batch))
        upcoming = [read.next_ms] if read.next_ms > 0 else []
        claimed = False
        for name, tick in read.due:
            resolved = entries.get(name)
            if resolved is None:  # an entry of other settings (a rolling deploy)
                continue
            next_tick = resolved.entry.next_tick_ms(max(tick, read.now_ms))
            self._claim(client, keys, resolved, tick, next_tick)
            claimed = True
            if next_tick is not None:
                upcoming.append(next_tick)
        if read.next_ms == 0 and claimed:
            return 0.0
        if not upcoming:
            return None
        return max(0, min(upcoming) - read.now_ms) / 1000

    def _claim(
        self,
        client: redis.Redis,
        keys: QueueKeys,
        resolved: ResolvedEntry,
        tick: int,
        next_tick: int | None,
    ) -> None:
        submission = resolved.submission()
        job = submission.job
        job.run_at = runtime.tick_datetime(tick)
        claim = commands.schedule_claim(
            keys,
            submission.new_job(),
            entry=resolved.entry.name,
            tick_ms=tick,
            next_tick_ms=-1 if next_tick is None else next_tick,
        )
        reply = run.execute(client, claim)
        name = resolved.entry.name
        if reply is ClaimOutcome.TAKEN:
            return
        if reply is ClaimOutcome.PAUSED:
            logger.debug("schedule entry %r is paused: tick %d passed over", name, tick)
            return
        assert not isinstance(reply, ClaimOutcome)  # noqa: S101 - the other replies
        runtime.announce(resolved, submission, reply)
        logger.debug("schedule entry %r: tick %d enqueued as %s", name, tick, reply[1])
