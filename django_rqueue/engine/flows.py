"""Multi-step exchanges with Redis written once, as generators that yield commands (pure).

A :type:`Flow` yields each :type:`~.commands.Step` it needs run and receives its
result; it does no I/O itself, so one flow serves sync and async code alike:
:func:`~.run.drive` runs it on a sync client, :func:`~.run.adrive` on an
asyncio one.

:func:`wait_for_job` is the Redis side of ``Job.wait`` / ``Job.await_``. A
waiter first marks the job as awaited (:attr:`~.fields.JobFields.AWAITED`) and
reads it in one step (``mark_awaited.lua``, which writes nothing for a job that
is gone), so a terminal transition that runs after the read sees the mark and
pushes a token to :meth:`~.keys.QueueKeys.done` (``include/wake_waiters.lua``);
one that ran before is seen by the read. The waiter then blocks on that list
(``BLPOP``) in slices shorter than the socket timeout and reads the job again
after each (a token left from an earlier life of the job, before a ``retry()``,
only costs one read). A waiter woken for good pushes the token back, so every
other waiter of the same job wakes too; the list expires 60 s later
(:data:`~.commands.DONE_TTL`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Generator
from typing import Any

from . import commands
from .commands import Step
from .connection import MIN_BLOCK
from .keys import QueueKeys
from .replies import Fields

#: A multi-step flow: yields the steps to run, receives each one's result, returns its own.
type Flow[T] = Generator[Step[Any], Any, T]

#: Longest single ``BLPOP`` in seconds: well under ``connection.SOCKET_TIMEOUT``.
BLOCK_SLICE = 5.0


def ask[T](step: Step[T]) -> Generator[Step[T], T, T]:
    """Yield ``step`` and return its result, typed (``got = yield from ask(step)``)."""
    return (yield step)


def deadline_of(timeout: float) -> float:
    """The ``time.monotonic()`` deadline of a wait of ``timeout`` seconds.

    Raises:
        ValueError: ``timeout`` is not a number >= 0.
    """
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or math.isnan(timeout)
        or timeout < 0
    ):
        raise ValueError(f"timeout must be a number of seconds >= 0, not {timeout!r}")
    return time.monotonic() + timeout


def block_seconds(remaining: float) -> float:
    """The ``BLPOP`` timeout for ``remaining`` seconds: at most :data:`BLOCK_SLICE`, and never
    below :data:`~.connection.MIN_BLOCK`."""
    return max(MIN_BLOCK, min(remaining, BLOCK_SLICE))


def wait_for_job(
    keys: QueueKeys,
    job_id: str,
    deadline: float,
    settled: Callable[[Fields], bool],
    now: Callable[[], float] = time.monotonic,
) -> Flow[bool]:
    """Wait until ``settled`` says the job is done with, or until ``deadline`` (on ``now``'s
    clock, seconds); return whether it settled (``False``: the deadline passed first).

    ``settled`` gets each read of the job's hash (``{}`` once it is gone) and
    may raise: the flow then ends with that exception.
    """
    woken = False
    while True:
        if settled((yield from ask(commands.mark_awaited(keys, job_id)))):
            if woken:
                yield from ask(commands.pass_on(keys, job_id))
            return True
        remaining = deadline - now()
        if remaining <= 0:
            return False
        woken = yield from ask(commands.block_done(keys, job_id, block_seconds(remaining)))
