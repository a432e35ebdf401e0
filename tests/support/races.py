"""Two threads that act at the same instant, trial after trial: the races of the workflow tests.

:class:`Racer` runs two callables per trial in two long-lived threads, each released by a
:class:`threading.Barrier` so that both send their Redis command at the same moment (each
thread has its own connection: the commands reach Redis side by side and Redis orders
them). A trial's exceptions are re-raised in the test's thread, with the trial's number.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

#: Seconds a trial may take before the race is declared stuck.
TRIAL_TIMEOUT = 10.0

type Side = Callable[[Any], Any]


class Racer:
    """Runs ``left(trial)`` and ``right(trial)`` together for each trial of :meth:`race`;
    ``after(trial)``, when given, runs once both have returned, before the next trial."""

    def __init__(self, left: Side, right: Side, after: Side | None = None) -> None:
        self.sides = (left, right)
        self.after = after

    def race(self, trials: Sequence[Any]) -> list[tuple[Any, Any]]:
        """Each trial in turn, both sides at once (behind a barrier); their return values
        per trial, in trial order.

        Raises:
            AssertionError: a side raised (named with its trial) or a trial got stuck.
        """
        barrier = threading.Barrier(2, timeout=TRIAL_TIMEOUT)
        results: list[list[Any]] = [[None, None] for _ in trials]
        errors: list[tuple[int, int, BaseException]] = []

        def run(side: int) -> None:
            act = self.sides[side]
            for n, trial in enumerate(trials):
                try:
                    barrier.wait()
                except threading.BrokenBarrierError:
                    return
                try:
                    results[n][side] = act(trial)
                    if self.after is not None:
                        barrier.wait()
                        if side == 0:
                            self.after(trial)
                except threading.BrokenBarrierError:
                    return
                except BaseException as exc:  # handed to the test's thread
                    errors.append((trial, side, exc))
                    barrier.abort()
                    return

        threads = [threading.Thread(target=run, args=(s,), daemon=True) for s in (0, 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(TRIAL_TIMEOUT * (len(trials) + 1))
            assert not thread.is_alive(), "a racing thread got stuck"
        if errors:
            trial, side, exc = errors[0]
            raise AssertionError(f"trial {trial!r}, side {side}: {exc!r}") from exc
        return [(a, b) for a, b in results]
