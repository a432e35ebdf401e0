"""The poller: promotes due scheduled jobs, reclaims expired leases, runs the schedule.

It sleeps until the earliest due time or lease deadline it learned from
Redis (capped at :data:`MAX_SLEEP`), blocking on the queues' ``wake`` lists
so that a job scheduled earlier than everything else wakes it at once. Any
number of pollers may run: every move is one atomic script, so a due job is
promoted exactly once. Each poller also runs a
:class:`~django_rqueue.worker.scheduler.Scheduler` for the periodic entries
(``RQUEUE["SCHEDULE"]``) on its queues, which claims each of their ticks
exactly once across all pollers, and applies each queue's failed-store
retention (``failed_ttl``, ``failed_max``) every :data:`TRIM_EVERY` seconds,
so old failures go even when no new failure arrives (a new failure applies
it too, in ``fail.lua``); at the same pace it forgets the workflows whose
record has expired (:meth:`Poller.forget_workflows`) and finishes or undoes the workflow
creations whose caller stalled (:meth:`Poller.sweep_openings`).

For jobs that wait for others (workflows, ``depends_on``), the same round relays
each queue's outbox to dependents on other queues (:class:`~.relay.Relay`; a job's
end there pushes a wake-up token, so it happens within one wake-up) and ends the
waiting jobs past their dependency deadline (``waiting_sweep.lua``; the sleep also
ends at the next such deadline). ``promote.lua``'s reply says whether either has
work, so a deployment without workflows sends nothing more.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence

import redis

from ..conf import get_config
from ..engine import commands, dependency_commands, run, workflow_record
from ..engine.calls import Retention
from ..engine.connection import MIN_BLOCK, get_client, location_of, redis_errors, redis_time_ms
from ..engine.keys import pollers_key
from ..engine.queue_ref import queue_ref
from ..engine.replies import Promoted
from ..exceptions import LeaseExpired, RedisUnavailable
from ..execution import error_record
from ..workflows import recovery
from .idle import IdleWaiter
from .outages import Outages
from .process import new_worker_id
from .reconnect import Reconnect
from .relay import Relay
from .scheduler import Scheduler

logger = logging.getLogger("django_rqueue.poller")

#: Seconds: the longest a poller sleeps without looking at Redis (at most one lease too).
MAX_SLEEP = 5.0
#: Seconds: Redis checks blocking-call timeouts only every ~100 ms (``hz 10``),
#: so a poller blocks until this long before the next due time, then sleeps
#: the rest locally; that keeps delayed jobs from starting up to 100 ms late.
BLOCK_SLACK = 0.15
#: Jobs moved per script call, so one call never blocks Redis for long.
BATCH = 500
#: Seconds between a poller's records of life in ``<prefix>:pollers`` (``rqueue_info --check``
#: reports no poller when none recorded one within
#: :data:`~django_rqueue.ops.workers.POLLER_SEEN`).
BEAT = 5.0
#: Seconds between two applications of the failed store's retention by one poller (the
#: next round comes at once while a backlog is left: each call deletes at most
#: :data:`~django_rqueue.engine.calls.TRIM_LIMIT` jobs).
TRIM_EVERY = 60.0


class Poller:
    """Promote, reclaim and schedule for ``queues`` (names) until ``stop`` is set."""

    def __init__(self, queues: Sequence[str], *, batch: int = BATCH) -> None:
        self.queues = list(queues)
        self.batch = batch
        self.scheduler = Scheduler(self.queues)
        #: Set to end :meth:`run` (after the round in progress).
        self.stop = threading.Event()
        self._lease_error = error_record(LeaseExpired("lease expired"))
        self.id = new_worker_id()
        self._next_beat = 0.0
        #: ``time.monotonic()`` of the next retention round (the first round has one).
        self._next_trim = 0.0
        #: The Redis servers that failed lately: their queues are skipped until their retry.
        self.outages = Outages()
        #: Delivers the queues' outbox entries to dependents on other queues.
        self.relay = Relay(self.id, self.outages)
        #: Queue -> the rank in its ``wfs`` where the next :meth:`forget_workflows` goes on.
        self._workflows_rank: dict[str, int] = {}
        #: Blocks on every queue's ``wake`` list at once, server by server, slot by slot.
        self.idle = IdleWaiter(self.outages)
        #: Set by :meth:`halt`: ends the wait in progress and every later one at once.
        self._cancel = threading.Event()

    def run_once(self) -> float:
        """Do one round over every queue; return seconds until the next round is due."""
        config = get_config()
        # Never sleep longer than a lease: a job reserved right after this
        # round must be reclaimed within about one lease if its worker dies.
        sleep = min(MAX_SLEEP, config.lease)
        if time.monotonic() >= self._next_trim:
            more = self.trim_failed()
            more = self.forget_workflows() or more
            self.sweep_openings()
            self._next_trim = 0.0 if more else time.monotonic() + TRIM_EVERY
            if more:
                sleep = 0.0
        failed: RedisUnavailable | None = None
        for queue in self.queues:
            server = location_of(queue)
            if not self.outages.usable(server, queue):  # down: wait for its retry time
                continue
            try:
                sleep = min(sleep, self._round(queue))
            except RedisUnavailable as exc:
                failed = exc
                delay = self.outages.failed(server, queue=queue, error=exc)
                logger.error(
                    "poller: queue %s: %s; leaving its Redis out for %.1f s", queue, exc, delay
                )
                continue
            if self.outages.recovered(server, queue):
                logger.info("poller: queue %s: Redis reachable again", queue)
        if failed is not None and all(
            not self.outages.usable(location_of(q), q) for q in self.queues
        ):
            raise failed  # every server is down: run() backs off
        try:
            next_tick = self.scheduler.run_once()
        except (RedisUnavailable, redis.ResponseError) as exc:
            # One server of the schedule's queues is down, or a structure of the schedule is
            # corrupt (the next round stores the entries again: schedule_sync.lua mends it).
            logger.error("poller: periodic entries: %s", exc)
            self.scheduler.resync()
            next_tick = None
        if next_tick is not None:
            sleep = min(sleep, next_tick)
        if time.monotonic() >= self._next_beat:
            try:
                self.beat()
            except RedisUnavailable as exc:  # the default Redis is down: its queues may not be
                logger.error("poller: no record of this round: %s", exc)
                self._next_beat = time.monotonic() + BEAT
        return sleep

    def _round(self, queue: str) -> float:
        """Promote, reclaim, relay and sweep on ``queue``; return the seconds until its next due
        time (a scheduled job, a lease deadline, a dependency deadline; 0: more work is there).

        ``promote.lua``'s reply also says whether the queue's outbox has entries and when its
        next dependency deadline falls, so the relay (:class:`~.relay.Relay`) and the sweep
        (``waiting_sweep.lua``) cost nothing on a queue without them. A script that
        Redis refuses (``redis.ResponseError``: a structure of the queue is corrupt, such as
        ``delayed`` holding a string, which the scripts cannot mend by themselves) is logged
        and the round goes on, so the poller never dies of it.

        Raises:
            RedisUnavailable: Redis cannot be reached.
        """
        ref = queue_ref(queue)
        sleep = MAX_SLEEP
        client, keys = ref.client(), ref.keys
        round_ = Promoted(0, -1, 0, -1)
        try:
            round_ = run.execute(client, commands.promote_round(keys, self.batch))
        except redis.ResponseError as exc:
            logger.error("queue %s: could not promote due jobs: %s", queue, exc)
        requeued, failed, next_deadline = 0, 0, -1
        try:
            requeued, failed, next_deadline = run.execute(
                client,
                commands.reclaim(keys, self.batch, self._lease_error, Retention.of(ref.config)),
            )
        except redis.ResponseError as exc:
            logger.error("queue %s: could not reclaim expired leases: %s", queue, exc)
        if requeued or failed:
            logger.warning(
                "queue %s: reclaimed %d expired lease(s), %d job(s) re-queued, %d failed",
                queue,
                requeued + failed,
                requeued,
                failed,
            )
        if round_.promoted:
            logger.debug("queue %s: promoted %d due job(s)", queue, round_.promoted)
        if round_.outbox > 0 and self._relay(queue):
            sleep = 0.0
        waiting_ms = round_.next_deadline_ms
        if waiting_ms == 0:
            waiting_ms = self._sweep(queue)
        for ms in (round_.next_due_ms, next_deadline, waiting_ms):
            if ms >= 0:
                sleep = min(sleep, ms / 1000)
        return sleep

    def _relay(self, queue: str) -> bool:
        """Relay one batch of ``queue``'s outbox; whether more may be waiting.

        Raises:
            RedisUnavailable: ``queue``'s Redis cannot be reached.
        """
        try:
            relayed = self.relay.relay(queue)
        except redis.ResponseError as exc:
            logger.error("queue %s: could not relay its outbox: %s", queue, exc)
            return False
        if relayed.read:
            logger.debug(
                "queue %s: relayed %d outbox entries (%d applied, %d duplicates, %d dropped, "
                "%d left)",
                queue,
                relayed.read,
                relayed.applied,
                relayed.duplicates,
                relayed.dropped,
                relayed.left,
            )
        return relayed.full

    def _sweep(self, queue: str) -> int:
        """End ``queue``'s waiting jobs past their dependency deadline (``waiting_sweep.lua``);
        return the ms until its next deadline (-1: none; 0: more are due).

        Raises:
            RedisUnavailable: ``queue``'s Redis cannot be reached.
        """
        ref = queue_ref(queue)
        try:
            swept = run.execute(
                ref.client(), dependency_commands.waiting_sweep(ref.keys, self.batch)
            )
        except redis.ResponseError as exc:
            logger.error(
                "queue %s: could not end jobs past their dependency deadline: %s", queue, exc
            )
            return -1
        if swept.cancelled:
            logger.warning(
                "queue %s: %d waiting job(s) cancelled past their dependency deadline",
                queue,
                swept.cancelled,
            )
        if swept.aborted:
            logger.info(
                "queue %s: deleted %d job(s) whose dependencies were never linked (their "
                "client died while creating them)",
                queue,
                swept.aborted,
            )
        return swept.next_deadline_ms

    def beat(self) -> None:
        """Record this poller's round in ``<prefix>:pollers`` (Redis time) and drop
        pollers silent for an hour; at most once per :data:`BEAT` seconds from run_once.

        Raises:
            RedisUnavailable: Redis cannot be reached.
        """
        client, key = get_client(), pollers_key(get_config().key_prefix)
        now = redis_time_ms(client)
        with redis_errors(client):
            pipe = client.pipeline(transaction=False)
            pipe.zadd(key, {self.id: now})
            pipe.zremrangebyscore(key, "-inf", now - 3_600_000)
            pipe.execute()
        self._next_beat = time.monotonic() + BEAT

    def trim_failed(self) -> bool:
        """Apply each queue's failed-store retention once (``trim_failed.lua``); whether a
        queue has more to delete than one call deletes."""
        more = False
        for queue, trimmed in self._each_queue("apply the failed-store retention", self._trim):
            if trimmed is None:  # no retention on this queue
                continue
            deleted, left = trimmed
            if deleted:
                logger.info(
                    "queue %s: deleted %d failed job(s) past failed_ttl/failed_max", queue, deleted
                )
            more = more or left
        return more

    def _trim(self, queue: str) -> tuple[int, bool] | None:
        ref = queue_ref(queue)
        retention = Retention.of(ref.config)
        if retention.ttl is None and retention.max_jobs is None:
            return None
        return run.execute(ref.client(), commands.trim_failed(ref.keys, retention))

    def forget_workflows(self) -> bool:
        """Walk one step of each queue's list of workflows (``wfs``), forgetting those whose
        record is gone (``wf_trim.lua``, :data:`~.workflow_record.TRIM_LIMIT` members from
        where the last step ended); whether a queue forgot some and has more to look at (a
        backlog: the next round comes at once). Called every :data:`TRIM_EVERY` seconds."""
        more = False
        for queue, (removed, rank) in self._each_queue("forget gone workflows", self._forget):
            self._workflows_rank[queue] = rank
            if removed:
                logger.debug("queue %s: forgot %d gone workflow(s)", queue, removed)
            more = more or (removed > 0 and rank > 0)
        return more

    def _forget(self, queue: str) -> workflow_record.Trimmed:
        ref = queue_ref(queue)
        rank = self._workflows_rank.get(queue, 0)
        return run.execute(ref.client(), workflow_record.trim(ref.keys, rank))

    def sweep_openings(self) -> None:
        """Finish or undo, on each queue, the workflow creations and ``retry_failed()`` calls
        whose caller stalled past their deadline (:func:`~.workflows.recovery.sweep_opening`).
        Called every :data:`TRIM_EVERY` seconds: a stalled one is handled within about two
        minutes of its start."""
        swept = self._each_queue("sweep stalled workflow creations", recovery.sweep_opening)
        for queue, handled in swept:
            if handled:
                logger.warning(
                    "queue %s: finished or undid %d stalled workflow creation(s)", queue, handled
                )

    def _each_queue[T](self, what: str, step: Callable[[str], T]) -> Iterator[tuple[str, T]]:
        """``(queue, step(queue))`` for each of the poller's queues whose Redis is usable.

        A command Redis refused (corrupt data) is logged as "could not <what>" and the queue
        passed over; a Redis that cannot be reached is left out for its retry time."""
        for queue in self.queues:
            server = location_of(queue)
            if not self.outages.usable(server, queue):
                continue
            try:
                result = step(queue)
            except redis.ResponseError as exc:  # corrupt data: logged, not fatal
                logger.error("queue %s: could not %s: %s", queue, what, exc)
                continue
            except RedisUnavailable as exc:
                delay = self.outages.failed(server, queue=queue, error=exc)
                logger.error(
                    "poller: queue %s: %s; leaving its Redis out for %.1f s", queue, exc, delay
                )
                continue
            yield queue, result

    def run(self) -> None:
        """Loop until :attr:`stop` is set. Redis outages are logged and retried."""
        reconnect = Reconnect()
        while not self.stop.is_set():
            try:
                sleep = self.run_once()
                if sleep > BLOCK_SLACK:
                    self._wait(sleep - BLOCK_SLACK)
                elif sleep > 0:
                    self.stop.wait(sleep)
                reconnect.reset()
            except RedisUnavailable as exc:
                self.scheduler.resync()
                delay = reconnect.next_delay()
                logger.error("poller: %s; retrying in %.1f s", exc, delay)
                self.stop.wait(delay)

    def halt(self, thread: threading.Thread) -> None:
        """Stop this poller running in ``thread`` and wait for the thread to end.

        Ends its blocking wait at once (``CLIENT UNBLOCK``, :meth:`~.idle.IdleWaiter.interrupt`).
        A round under way finishes first; with a Redis unreachable it ends by
        itself within about :data:`MAX_SLEEP` seconds: this waits that long at most.
        """
        self.stop.set()
        self.idle.interrupt(self._cancel)
        thread.join(MAX_SLEEP + 1)
        self.idle.close()

    def _wait(self, seconds: float) -> None:
        """Block on the ``wake`` lists of every queue, whatever its server or cluster slot,
        for up to ``seconds`` (:class:`~.idle.IdleWaiter`; servers down are left out)."""
        lists = [(queue, queue_ref(queue).keys.wake) for queue in self.queues]
        self.idle.wait(lists, max(seconds, MIN_BLOCK), cancel=self._cancel)
