"""Idle waiting on the wake-up lists of queues spread over several servers or cluster slots.

An idle worker blocks on its queues' ``notify`` lists and a poller on their
``wake`` lists (``BLPOP``), so that a job starts within milliseconds of its
enqueue without polling. One ``BLPOP`` can cover several lists only on one
server and, in a Redis Cluster, only within one slot (each queue is its own
slot: its hash tag). So :class:`IdleWaiter` groups the lists into
:class:`Target` s, one per server (per-queue ``REDIS_URL``) and, in a cluster,
one per list (on the master of its slot), and blocks on all of them at once:

- one target blocks in the calling thread;
- several block in threads of their own, each on a connection it keeps for
  the waiter's life (taken from the server's pool, so its ``CLIENT ID`` is
  read once), and the waiter returns as soon as one of them returns. The
  others are then ended with ``CLIENT UNBLOCK <id>`` sent from another
  connection of the same server (a blocked ``BLPOP`` so unblocked replies as
  if it timed out, taking nothing), and a token that one of them popped in
  the meantime is pushed back, so that no later wake-up meant for another
  idle worker is stolen. The alternative, short timeouts on every server in
  turn, would cost a round trip per server per slice and wake up to a slice
  late (``docs/explanation/worker.md``, "Idle waiting across servers").

With one target, :meth:`IdleWaiter.wait_then` sends a command behind the
``BLPOP`` in the same write (the worker's next reserve), so that Redis runs it
the moment the ``BLPOP`` returns and its reply comes with the wake-up: one
round trip from token to job instead of two, as Huey's consumer gets its job
from its one ``BRPOP``. A wait on several targets or a cluster slot does not
send it (the caller reserves afterwards, as before).

A target whose server fails (connection refused, timeout) is noted down in
the shared :class:`~.outages.Outages` and left out until its retry time,
while the others keep blocking; the wait raises ``RedisUnavailable`` only
when every target failed. A cluster's redirection (``MOVED``, ``ASK``: the
slot moved) ends the wait as a wake-up, so that the caller's next reserve
goes through the cluster client, which follows it and refreshes its slot map.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import redis

from ..engine.connection import (
    as_cluster,
    get_client,
    location_of,
    redis_errors,
    server_name,
    unavailable,
)
from ..engine.errors import REDIRECTED
from ..exceptions import RedisUnavailable
from .blocking import FALLBACK_SLICE, Arg, Blocker, can_unblock
from .outages import Outages

logger = logging.getLogger("django_rqueue.worker")

#: Seconds past its own timeout that a blocked call is given to come back (Redis checks
#: blocking timeouts ~10 times a second) before the waiter ends it with ``CLIENT UNBLOCK``.
SLACK = 0.5
#: Seconds between two ``CLIENT UNBLOCK`` of a call that was not blocked yet when asked.
UNBLOCK_EVERY = 0.005


class Woken(NamedTuple):
    """How a wait ended (:meth:`IdleWaiter.wait_then`)."""

    #: Whether a token came (or a cluster redirected a call).
    woke: bool
    #: Whether the command was sent behind the ``BLPOP`` (and :attr:`reply` is its reply).
    sent: bool = False
    #: The command's reply (an error reply as its :class:`redis.ResponseError`).
    reply: Any = None


@dataclass(frozen=True)
class Target:
    """Lists one ``BLPOP`` can block on: all on one server and, in a cluster, in one slot."""

    #: The server, as :class:`~.outages.Outages` knows it (the queues' location).
    server: Hashable
    #: A client of that one server (a cluster's master: its node client).
    client: redis.Redis
    #: The lists, in the order of the caller's queues.
    keys: tuple[str, ...]
    #: In a cluster, the (only) list's name: one connection per slot; ``None`` otherwise.
    slot_key: str | None = None


def targets_of(lists: Sequence[tuple[str, str]]) -> list[Target]:
    """Group ``(queue, list key)`` pairs into :class:`Target` s (see the module docstring).

    Raises:
        RedisUnavailable: a cluster client could not be made (no node answers), or a
            slot has no master for now.
    """
    by_server: dict[Hashable, tuple[redis.Redis, list[str]]] = {}
    found: list[Target] = []
    for queue, key in lists:
        server, client = location_of(queue), get_client(queue)
        cluster = as_cluster(client)
        if cluster is not None:
            with redis_errors(client):  # SlotNotCoveredError: the slot has no master now
                master = cluster.get_node_from_key(key)  # type: ignore[no-untyped-call]
                node = cluster.get_redis_connection(master)
            found.append(Target(server, node, (key,), key))
        else:
            by_server.setdefault(server, (client, []))[1].append(key)
    found += [Target(s, client, tuple(keys)) for s, (client, keys) in by_server.items()]
    return found


class IdleWaiter:
    """Blocks on wake-up lists across servers and slots (module docstring).

    ``outages``: shared with the caller's reserving calls, so that a server that
    failed there is not blocked on either, and the reverse.
    """

    def __init__(self, outages: Outages | None = None) -> None:
        #: The servers left out while they are down.
        self.outages = outages or Outages()
        self._blockers: dict[tuple[int, str | None], Blocker] = {}
        self._threads: concurrent.futures.ThreadPoolExecutor | None = None
        #: How many threads :attr:`_threads` has (one per target of the widest wait so far).
        self._thread_count = 0
        self._lock = threading.Lock()
        #: The blockers of the wait in progress, and its cancel event (``interrupt``).
        self._busy: list[Blocker] = []
        self._cancel: threading.Event | None = None
        self._done = threading.Event()
        self._done.set()

    def wait(
        self,
        lists: Sequence[tuple[str, str]],
        seconds: float,
        *,
        cancel: threading.Event | None = None,
    ) -> bool:
        """Block until a token comes on one of ``lists`` (``(queue, list key)`` pairs) or
        ``seconds`` pass; return whether a token came (or a cluster redirected a call).

        Servers down in :attr:`outages` are left out; with none left it sleeps until
        the earliest retry time (at most ``seconds``). ``cancel``: set by
        :meth:`interrupt` from another thread to end this wait at once.

        Raises:
            RedisUnavailable: every server tried failed (each is noted down).
        """
        return self._locked(lists, seconds, cancel, None).woke

    def wait_then(
        self, lists: Sequence[tuple[str, str]], seconds: float, command: Sequence[Arg]
    ) -> Woken:
        """:meth:`wait`, and, when the wait has one target (one server, not a cluster),
        ``command`` sent right behind its ``BLPOP`` in the same write, so that Redis runs it
        the moment the ``BLPOP`` returns (token or timeout): one round trip for both.

        ``command`` must be for that server (its keys on the lists' server). With several
        targets, a cluster, or none usable, it is not sent (:attr:`Woken.sent` false) and the
        wait goes as :meth:`wait`.

        Raises:
            RedisUnavailable: as :meth:`wait`. When ``command`` was sent, this and any
                exception a signal handler raises during the wait leave its reply unread:
                it may or may not have run.
        """
        return self._locked(lists, seconds, None, command)

    def _locked(
        self,
        lists: Sequence[tuple[str, str]],
        seconds: float,
        cancel: threading.Event | None,
        command: Sequence[Arg] | None,
    ) -> Woken:
        with self._lock:
            self._cancel, self._busy = cancel, []
            self._done.clear()
            try:
                return self._wait(lists, seconds, cancel, command)
            finally:
                self._busy, self._cancel = [], None
                self._done.set()

    def interrupt(self, cancel: threading.Event) -> None:
        """End the wait started with ``cancel`` (now, or as soon as it blocks), from another
        thread; returns once that wait is over or never began (at most ~:data:`SLACK` s)."""
        cancel.set()
        deadline = time.monotonic() + SLACK
        while self._cancel is cancel and not self._done.is_set():
            for blocker in list(self._busy):
                blocker.unblock()
            if self._done.wait(UNBLOCK_EVERY) or time.monotonic() > deadline:
                return

    def close(self) -> None:
        """Drop the kept connections and the threads."""
        for blocker in self._blockers.values():
            blocker.close()
        self._blockers.clear()
        if self._threads is not None:
            self._threads.shutdown(wait=False)
            self._threads = None

    # -- inside a wait ---------------------------------------------------------

    def _wait(
        self,
        lists: Sequence[tuple[str, str]],
        seconds: float,
        cancel: threading.Event | None,
        command: Sequence[Arg] | None,
    ) -> Woken:
        targets = [t for t in targets_of(lists) if self.outages.usable(t.server)]
        if not targets:
            retry = self.outages.seconds_to_retry()
            pause = seconds if retry is None else min(seconds, retry)
            (cancel or threading.Event()).wait(max(0.0, pause))
            return Woken(False)
        blockers = [self._blocker(t) for t in targets]
        self._busy = blockers
        if cancel is not None and cancel.is_set():
            return Woken(False)
        if (len(targets) > 1 or cancel is not None) and not all(
            can_unblock(t.server) for t in targets
        ):
            return Woken(self._sliced(targets, blockers, seconds, cancel))
        if len(targets) == 1:
            if command is not None and targets[0].slot_key is None:
                return self._one_then(targets[0], blockers[0], seconds, command)
            return Woken(self._one(targets[0], blockers[0], seconds))
        return Woken(self._many(targets, blockers, seconds))

    def _sliced(
        self,
        targets: list[Target],
        blockers: list[Blocker],
        seconds: float,
        cancel: threading.Event | None,
    ) -> bool:
        """The wait without ``CLIENT UNBLOCK``: slices of :data:`FALLBACK_SLICE` seconds,
        each ending by itself on every target (:mod:`~.blocking`)."""
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or (cancel is not None and cancel.is_set()):
                return False
            slice_ = min(left, FALLBACK_SLICE)
            if len(targets) == 1:
                woke = self._one(targets[0], blockers[0], slice_)
            else:
                woke = self._many(targets, blockers, slice_)
            if woke:
                return True

    def _blocker(self, target: Target) -> Blocker:
        key = (id(target.client), target.slot_key)
        blocker = self._blockers.get(key)
        if blocker is None or blocker.client is not target.client:
            blocker = self._blockers[key] = Blocker(target.client, target.server)
        return blocker

    def _one(self, target: Target, blocker: Blocker, seconds: float) -> bool:
        try:
            reply = blocker.blpop(target.keys, seconds)
        except REDIRECTED:
            return True
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            self._failed(target, exc)
            raise _unavailable(exc, target) from exc
        self._recovered(target)
        return reply is not None

    def _one_then(
        self, target: Target, blocker: Blocker, seconds: float, command: Sequence[Arg]
    ) -> Woken:
        try:
            popped, reply = blocker.blpop_then(target.keys, seconds, command)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            self._failed(target, exc)
            raise _unavailable(exc, target) from exc
        self._recovered(target)
        return Woken(popped is not None, True, reply)

    def _many(self, targets: list[Target], blockers: list[Blocker], seconds: float) -> bool:
        if self._threads is None or self._thread_count < len(targets):
            if self._threads is not None:
                self._threads.shutdown(wait=False)
            self._threads = concurrent.futures.ThreadPoolExecutor(
                max_workers=len(targets), thread_name_prefix="rqueue-idle"
            )
            self._thread_count = len(targets)
        calls = {
            self._threads.submit(b.blpop, t.keys, seconds): (t, b)
            for t, b in zip(targets, blockers, strict=True)
        }
        pending = set(calls)
        woke, errors = False, []
        deadline = time.monotonic() + seconds + SLACK
        try:
            while pending and not woke:
                done, pending = concurrent.futures.wait(
                    pending,
                    timeout=max(0.0, deadline - time.monotonic()),
                    return_when=concurrent.futures.FIRST_COMPLETED,
                )
                if not done:
                    break
                for future in done:
                    target, _ = calls[future]
                    try:
                        reply = future.result()
                    except REDIRECTED:
                        woke = True
                    except (redis.ConnectionError, redis.TimeoutError) as exc:
                        self._failed(target, exc)
                        errors.append(exc)
                    else:
                        self._recovered(target)
                        if reply is not None:
                            if woke:
                                _push_back(target, reply)
                            woke = True
        finally:
            self._end(pending, calls)
        if errors and len(errors) == len(targets):
            raise _unavailable(errors[0], targets[0]) from errors[0]
        return woke

    def _end(
        self,
        pending: set[concurrent.futures.Future[list[bytes] | None]],
        calls: dict[concurrent.futures.Future[list[bytes] | None], tuple[Target, Blocker]],
    ) -> None:
        """Unblock the calls still out and wait for them; push back the tokens they took."""
        deadline = time.monotonic() + SLACK
        while pending and time.monotonic() < deadline:
            for future in pending:
                calls[future][1].unblock()
            done, pending = concurrent.futures.wait(pending, timeout=UNBLOCK_EVERY)
            for future in done:
                target, _ = calls[future]
                if future.exception() is None and (reply := future.result()) is not None:
                    _push_back(target, reply)
        for future in pending:  # never came back: that connection is out of step
            calls[future][1].close()

    def _failed(self, target: Target, exc: BaseException) -> None:
        delay = self.outages.failed(target.server)
        logger.error(
            "Redis at %s (of %s) is unreachable (%s); leaving it out for %.1f s",
            server_name(target.client),
            ", ".join(target.keys),
            exc,
            delay,
        )

    def _recovered(self, target: Target) -> None:
        if self.outages.recovered(target.server):
            logger.info(
                "Redis at %s (of %s) is reachable again",
                server_name(target.client),
                ", ".join(target.keys),
            )


def _unavailable(exc: Exception, target: Target) -> RedisUnavailable:
    """``exc``, a connection or timeout error, as the error naming ``target``'s server."""
    return unavailable(exc, target.client) or RedisUnavailable(f"Redis is unreachable: {exc}")


def _push_back(target: Target, reply: list[bytes]) -> None:
    """Give back a token a second blocked call took: another idle worker may need it."""
    try:
        target.client.rpush(reply[0], reply[1])
    except redis.RedisError:
        pass  # the list's server is gone, or the slot moved: a token is an optimisation
