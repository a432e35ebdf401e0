"""The worker's reservation policy, one for the sync loop and the async runner.

A :class:`Reserver` decides which queue a worker asks next and how many jobs
it asks for, and sends the reserving calls:

- the queue order, strict or weighted (:class:`~.weights.QueueOrder`);
- a rate-limited queue is treated as empty until its next slot
  (:class:`~.rate_limits.NextSlots`), a queue whose Redis refused to reserve
  from it for :data:`REFUSED_PAUSE` seconds;
- a server (or cluster slot) that failed is left out until its retry time
  (:class:`~.outages.Outages`); when every one is down the caller backs off;
- the batch size of a queue that may lead a fetch (:meth:`Reserver.batch_size`:
  as many jobs as fit in :data:`BATCH_BUDGET` seconds at the average run time
  seen, at most :data:`MAX_BATCH`);
- the idle pickup: the reserve a worker of one queue sends behind its idle
  ``BLPOP`` (:class:`Pickup`), asked for again with the same request id when its
  reply was lost;
- what an idle worker blocks on and for how long (:meth:`Reserver.idle_wait`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import redis
from redis.exceptions import RedisClusterException

from .. import signals
from ..engine import commands, run
from ..engine.calls import ScriptCall
from ..engine.connection import MIN_BLOCK, Location, get_client, location_of
from ..engine.queue_ref import queue_ref
from ..engine.replies import Reservation, Reserved, reserved_from
from ..exceptions import LeaseLost, RedisUnavailable
from ..job import Job
from ..types import JobSpec
from .limits import Limits
from .outages import Outages
from .rate_limits import NextSlots
from .reserve_params import ReserveParams
from .weights import QueueOrder

logger = logging.getLogger("django_rqueue.worker")

#: Seconds an idle worker blocks on Redis per call: an idle worker costs Redis
#: about 2 commands per IDLE_BLOCK (BLPOP + a reserve). It is also the longest
#: an idle in-process worker takes to notice SIGTERM (a supervised child is
#: interrupted at once).
IDLE_BLOCK = 4.0

#: Seconds of work (at the average run time seen) a batch reservation may hold.
BATCH_BUDGET = 0.05
#: Most jobs reserved in one round trip: jobs of 1 ms or more reach BATCH_BUDGET first.
#: 50 rather than 20: the bench's no-op drain with two processes on two cores went from
#: 7 891 to 9 747 jobs/s, one run each in one minute.
MAX_BATCH = 50
#: Seconds a worker leaves a queue alone after Redis refused to reserve from it (an error
#: reply such as WRONGTYPE: a structure of that queue is corrupt), serving its other queues.
REFUSED_PAUSE = 5.0
#: The error replies that are not about the queue's data: a Redis Cluster moving slots.
TRANSIENT = (
    redis.exceptions.TryAgainError,
    redis.exceptions.MovedError,
    redis.exceptions.AskError,
    redis.exceptions.ClusterDownError,
)

#: ``(queue, reservation, when its request was sent)`` (``time.monotonic()``).
Taken = tuple[str, Reserved, float]


class IdleWait(NamedTuple):
    """What an idle worker blocks on (:meth:`Reserver.idle_wait`)."""

    #: The ``notify`` lists to ``BLPOP``, in the worker's queue order (none: just sleep).
    notify: list[str]
    #: How long, in seconds.
    seconds: float
    #: The queue of each list in :attr:`notify` (where it is: its server or slot).
    queues: list[str]

    def lists(self) -> list[tuple[str, str]]:
        """``(queue, notify list)`` pairs, as :meth:`~.idle.IdleWaiter.wait` takes them."""
        return list(zip(self.queues, self.notify, strict=True))


@dataclass
class Pickup:
    """A reserve sent behind the idle ``BLPOP`` (``Worker._wait_for_work``),
    taken by the next :meth:`~.loop.Worker.work_once`.

    Its jobs are dated by when it was sent: a reply that waited while the worker was
    paused or cut off looks fresh when read, though its leases may have run out and its
    jobs run elsewhere meanwhile. So a job that came after a third of a lease of idle
    waiting (only with a ``LEASE`` under three times :data:`IDLE_BLOCK`) is confirmed
    with one lease renewal before it starts (:mod:`~.prefetch`)."""

    queue: str
    #: The reserve call (:func:`~.engine.calls.reserve`): sent again, its request id makes it
    #: return the jobs it reserved.
    call: ScriptCall
    #: When it was first sent (``time.monotonic()``, taken before the write): the jobs it
    #: reserves are dated by this, whenever and however often their reply is read.
    sent_at: float = 0.0
    #: Its reply, once read; ``None``: unread (lost, or never sent): send it again.
    reply: Any = None


class Reserver:
    """The reservation policy of one worker serving ``queues`` (in priority order; with
    ``weights``, queue -> integer >= 1, in a weighted random order per job).

    ``supervised``: a master renews the leases of the jobs held ahead, so batches
    of more than one job may be reserved.
    """

    def __init__(
        self,
        queues: Sequence[str],
        weights: Mapping[str, int] | None,
        *,
        worker_id: str,
        limits: Limits,
        supervised: bool,
    ) -> None:
        self.queues = list(queues)
        self.worker_id = worker_id
        self.limits = limits
        self.supervised = supervised
        #: The order the queues are tried in, fetch after fetch (:mod:`~.weights`).
        self.order = QueueOrder(self.queues, weights)
        #: When each rate-limited queue that held jobs back has its next slot.
        self.next_slots = NextSlots()
        #: The Redis servers that failed lately: their queues are skipped until their retry.
        self.outages = Outages()
        #: Average seconds a job ran (EWMA), per queue that may lead a fetch; absent
        #: until one ran.
        self.run_times: dict[str, float] = {}
        #: Whether the last job of a queue that may lead a fetch had no
        #: job_succeeded receivers.
        self.quiet: dict[str, bool] = {}
        #: The reserve sent behind the last idle ``BLPOP``, until it is taken.
        self.pickup: Pickup | None = None
        #: Per queue, the async reserve whose reply was lost and when it was first sent
        #: (``time.monotonic()``): sent again by the next :meth:`areserve` of that queue.
        self.unanswered: dict[str, tuple[ScriptCall, float]] = {}

    # -- which queues ----------------------------------------------------

    def usable(self, queue: str) -> bool:
        """Whether ``queue`` may be asked now: not before its next slot, nor while its
        Redis (or cluster slot) waits for its retry time."""
        if self.next_slots.limited(queue):  # as if empty until its next slot
            return False
        return self.outages.usable(location_of(queue), queue)

    def all_down(self) -> bool:
        """Whether the Redis of every queue is left out (the caller backs off)."""
        return all(not self.outages.usable(location_of(q), q) for q in self.queues)

    def server_failed(self, queue: str, server: Location, exc: RedisUnavailable) -> None:
        """A call to ``queue``'s Redis failed: leave its queues out until its retry time
        (``queue`` alone when its cluster slot is moving:
        :class:`~django_rqueue.exceptions.SlotMoving`)."""
        delay = self.outages.failed(server, queue=queue, error=exc)
        logger.error(
            "worker %s: queue %s: %s; leaving its Redis out for %.1f s",
            self.worker_id,
            queue,
            exc,
            delay,
        )

    def recovered(self, queue: str, server: Location) -> None:
        """A call to ``queue``'s Redis worked: serve it again (logged if it was left out)."""
        if self.outages.recovered(server, queue):
            logger.info("worker %s: queue %s: Redis reachable again", self.worker_id, queue)

    def refused(self, queue: str, exc: redis.ResponseError) -> None:
        """Redis refused to reserve from ``queue`` (an error reply such as ``WRONGTYPE``:
        a structure of that queue is corrupt, which the scripts report before changing
        anything): log it and leave the queue alone for :data:`REFUSED_PAUSE` seconds, as
        a rate-limited one, so the worker serves its other queues and does not die."""
        logger.error(
            "worker %s: queue %s: Redis refused to hand out jobs (%s); trying again in %.0f s",
            self.worker_id,
            queue,
            exc,
            REFUSED_PAUSE,
        )
        self.next_slots.note(queue, int(REFUSED_PAUSE * 1000))

    # -- how many --------------------------------------------------------

    def ran(self, queue: str, seconds: float, job_function: JobSpec | None) -> bool:
        """A job of ``queue`` ran ``seconds``: update its average run time if ``queue`` may
        lead a fetch; return whether it may."""
        if not self.order.leads(queue):
            return False
        before = self.run_times.get(queue)
        self.run_times[queue] = seconds if before is None else 0.8 * before + 0.2 * seconds
        self.quiet[queue] = not signals.job_succeeded.has_listeners(job_function)
        return True

    def batch_size(self, queue: str) -> int:
        """How many jobs of ``queue`` (one that may lead a fetch) to reserve in one round trip."""
        run_time = self.run_times.get(queue)
        # Only under a supervisor: its master renews the leases of jobs held ahead.
        if not self.quiet.get(queue) or run_time is None or not self.supervised:
            return 1
        size = min(MAX_BATCH, max(1, int(BATCH_BUDGET / max(run_time, 1e-6))))
        max_jobs = self.limits.max_jobs
        if max_jobs is not None:
            size = min(size, max(1, max_jobs - self.limits.processed - 1))
        return size

    # -- the calls -------------------------------------------------------

    def params(self, queue: str) -> ReserveParams:
        """The reserve parameters of ``queue``, for every reserving call of it (sync, async,
        with an ack, behind the idle ``BLPOP``).

        Raises:
            ValueError: ``queue`` is not declared.
        """
        return ReserveParams(queue_ref(queue), self.worker_id)

    def reserve(self, queue: str, count: int) -> Reserved:
        """Reserve up to ``count`` jobs of ``queue`` and note its next slot.

        Raises:
            RedisUnavailable: its Redis could not be reached.
            redis.ResponseError: Redis refused (see :meth:`refused`; :data:`TRANSIENT`).
        """
        params = self.params(queue)
        reserved = run.execute(params.ref.client(), commands.reserving(params.reserve(count)))
        self.next_slots.note(queue, reserved.wait_ms)
        return reserved

    def reserve_call(self, queue: str, count: int) -> ScriptCall:
        """The reserve call for up to ``count`` jobs of ``queue``, with a fresh request id
        (sent again, it returns the jobs its first send reserved)."""
        return self.params(queue).reserve(count)

    async def areserve(self, queue: str, count: int) -> tuple[list[Reservation], float]:
        """:meth:`reserve` from an event loop (its asyncio client, or the sync one in a
        thread under ``CACHE_ALIAS``): ``(reservations, when the request was first sent)``
        (``time.monotonic()``, taken before the write).

        A reserve whose reply was lost (:class:`~django_rqueue.exceptions.RedisUnavailable`)
        is kept (:attr:`unanswered`) and sent again, same request id, by the next call for
        ``queue``, as the idle pickup is: the jobs it reserved come back (maybe more than
        ``count``: the first send's count) instead of staying reserved until their leases
        run out. They are dated by its first send.

        Raises:
            RedisUnavailable: its Redis could not be reached (the call is kept).
        """
        ref = queue_ref(queue)
        call, sent_at = self.unanswered.pop(queue, (None, 0.0))
        if call is None:
            call, sent_at = self.reserve_call(queue, count), time.monotonic()
        client = ref.async_client()
        try:
            if client is None:  # CACHE_ALIAS: no asyncio client
                reserved = await asyncio.to_thread(
                    run.execute, ref.client(), commands.reserving(call)
                )
            else:
                reserved = await run.aexecute(client, commands.reserving(call))
        except RedisUnavailable:
            self.unanswered[queue] = (call, sent_at)
            raise
        self.next_slots.note(queue, reserved.wait_ms)
        return reserved.jobs, sent_at

    def ack_and_reserve(
        self, queue: str, job: Job[Any], result: str, count: int
    ) -> tuple[LeaseLost | None, Reserved]:
        """Ack ``job`` (its sealed ``result``) and reserve up to ``count`` jobs of ``queue``
        in one round trip (``ack_reserve.lua``); note its next slot.

        Raises:
            RedisUnavailable: its Redis could not be reached, even by the same request
                sent again for :data:`~.reserve_params.RESEND_PATIENCE` seconds (then ack
                it plainly: a new request would reserve more jobs).
        """
        stale, reserved = self.params(queue).ack_and_reserve(job, result, count)
        self.next_slots.note(queue, reserved.wait_ms)
        return stale, reserved

    def sweep(self) -> Iterator[Taken]:
        """Reserve from each usable queue in turn (the first of the order a batch when it
        may lead a fetch), yielding each reservation, empty ones too; the caller stops
        at the first that gave it a job.

        Raises:
            RedisUnavailable: every server is down (after the walk).
            redis.ResponseError: a :data:`TRANSIENT` error reply (a cluster moving slots).
        """
        failed: RedisUnavailable | None = None
        order = self.order.order()
        #: After an empty first queue: the others that may hold queued jobs (None: all).
        maybe: set[str] | None = None
        for n, queue in enumerate(order):
            if not self.usable(queue):  # limited, or down: wait for its slot or retry time
                continue
            if maybe is not None and queue not in maybe:
                continue
            server = location_of(queue)
            count = 1
            if n == 0 and self.order.leads(queue):
                count = self.order.run(queue, self.batch_size(queue))
            # Before the request: the leases may start any time after this.
            reserved_at = time.monotonic()
            try:
                reserved = self.reserve(queue, count)
            except RedisUnavailable as exc:
                failed = exc
                self.server_failed(queue, server, exc)
                continue
            except redis.ResponseError as exc:
                if isinstance(exc, TRANSIENT):
                    raise
                self.refused(queue, exc)
                continue
            self.recovered(queue, server)
            yield queue, reserved, reserved_at
            if n == 0 and not reserved.jobs and len(order) > 2:
                maybe = self.holding(order[1:])
        if failed is not None and self.all_down():
            raise failed  # every server is down: the caller backs off

    def holding(self, queues: Sequence[str]) -> set[str]:
        """Which of ``queues`` hold queued jobs now: one pipelined ``EXISTS`` of each
        queue's ``prios`` key (present exactly while it has queued jobs) per server,
        instead of a reserve call per empty queue. Every queue of a server that could not
        be read counts as holding jobs (its reserve says)."""
        by_client: dict[int, tuple[redis.Redis, list[str]]] = {}
        for queue in queues:
            client = queue_ref(queue).client()
            by_client.setdefault(id(client), (client, []))[1].append(queue)
        holding: set[str] = set()
        for client, names in by_client.values():
            try:
                pipe = client.pipeline(transaction=False)
                for queue in names:
                    pipe.exists(queue_ref(queue).keys.prios)
                found = pipe.execute()
            except (redis.RedisError, RedisClusterException):
                holding.update(names)
                continue
            holding.update(q for q, present in zip(names, found, strict=True) if present)
        return holding

    # -- idle --------------------------------------------------------------

    def idle_wait(self) -> IdleWait:
        """What an idle worker blocks on, and how long.

        The ``notify`` lists of every queue, whatever its server or cluster
        slot (:mod:`~.idle` blocks on them all at once), less those of
        rate-limited queues before their next slot (a token there must not
        wake it for an empty reservation), maybe none; for :data:`IDLE_BLOCK`
        seconds, or only until the earliest next slot of a rate-limited queue
        (at least :data:`~django_rqueue.engine.connection.MIN_BLOCK`).
        """
        queues = [q for q in self.queues if not self.next_slots.limited(q)]
        notify = [queue_ref(q).keys.notify for q in queues]
        seconds = IDLE_BLOCK
        slot = self.next_slots.seconds_to_next()
        if slot is not None:
            seconds = max(MIN_BLOCK, min(seconds, slot))
        return IdleWait(notify, seconds, queues)

    def pickup_for(self, wait: IdleWait, *, holding: bool) -> Pickup | None:
        """The reserve to send behind the idle ``BLPOP`` of ``wait``: the one the next
        :meth:`sweep` would send, when the wait covers exactly the queue it asks
        (a worker of one queue, not held back by its rate limit, ``holding`` no job
        reserved ahead); else ``None``."""
        if len(self.queues) != 1 or wait.queues != self.queues or holding:
            return None
        queue = self.queues[0]
        count = self.order.run(queue, self.batch_size(queue))
        return Pickup(queue, self.reserve_call(queue, count))

    def take_pickup(self) -> Taken | None:
        """The reservation of :attr:`pickup` (see ``_take``), or ``None`` when there is
        none or Redis refused it (:meth:`refused`: the script reserved nothing).

        Raises:
            RedisUnavailable: it could not be sent again; it stays to be taken later.
            redis.ResponseError: a :data:`TRANSIENT` error reply.
        """
        pickup = self.pickup
        if pickup is None:
            return None
        try:
            return self._take(pickup)
        except redis.ResponseError as exc:
            if isinstance(exc, TRANSIENT):
                raise
            self.pickup = None
            self.refused(pickup.queue, exc)
            return None

    def settle_pickup(self) -> Taken | None:
        """At exit: the reservation of a :attr:`pickup` not taken (a stop came in the wait),
        for its jobs to be handed back; ``None`` when there is none or it cannot be read
        (logged: a job it reserved stays reserved until its lease runs out)."""
        if self.pickup is None:
            return None
        try:
            return self._take(self.pickup)
        except (RedisUnavailable, redis.RedisError) as exc:
            logger.error(
                "worker %s: queue %s: could not read the reserve sent while idle (%s); "
                "a job it reserved stays reserved until its lease runs out",
                self.worker_id,
                self.pickup.queue,
                exc,
            )
            return None

    def _take(self, pickup: Pickup) -> Taken:
        """The reservation of the reserve sent behind the idle ``BLPOP``: its reply, or, unread,
        the reply of the same request sent again (same request id: the same jobs if the
        first one ran); its next slot noted.

        The time requested is always when the reserve was first sent
        (:attr:`Pickup.sent_at`): Redis may have run it any time after that, and a
        reply held by a paused process or a partition, or one given again to the
        request sent again, says nothing about how long its leases have run.

        Raises:
            RedisUnavailable: it could not be sent again; it stays to be taken later.
            redis.ResponseError: Redis refused it.
        """
        queue = pickup.queue
        if pickup.reply is not None:
            try:
                reserved = reserved_from(pickup.reply)
            except redis.ResponseError:  # NOSCRIPT (a restarted Redis): sent again below
                pickup.reply = None
            else:
                self.pickup = None
                self.next_slots.note(queue, reserved.wait_ms)
                return queue, reserved, pickup.sent_at
        try:
            reserved = run.execute(get_client(queue), commands.reserving(pickup.call))
        except RedisUnavailable as exc:
            self.server_failed(queue, location_of(queue), exc)
            raise
        self.recovered(queue, location_of(queue))
        self.pickup = None
        self.next_slots.note(queue, reserved.wait_ms)
        return queue, reserved, pickup.sent_at
