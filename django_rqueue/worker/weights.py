"""Which queue a worker serves next: strict order, or weighted (``--queues high:5,low:1``).

``--queues a,b,c`` is **strict**: every fetch tries ``a`` first, then ``b``,
then ``c``, so ``b`` is served only while ``a`` is empty. ``--queues
a:5,b:3,c:1`` is **weighted**, with Sidekiq's rule: each fetch tries the
queues in a fresh random order in which a queue comes first with probability
weight / total weight, and, among the queues not yet placed, each next one
likewise (``mperham/sidekiq: lib/sidekiq/fetch.rb``, ``BasicFetch#queues_cmd``
shuffles the list holding each queue ``weight`` times and drops the repeats;
its wiki, *Advanced Options*: with ``-q critical,2 -q default`` "critical" is
checked about twice as often; without weights queues are processed strictly
in order). Under a backlog on every queue, the share of jobs each queue gets
is its weight over the total; an empty queue hands its turn to the next in
that fetch's order, so no queue starves and no worker idles while work waits.

A weighted worker draws once **per job**, not per round trip: a batch of
``n`` jobs of one queue (a reservation ahead, ``ack_reserve.lua``'s next job,
a batch) is taken only when the next ``n`` draws all chose that queue, and
the draw that broke the run picks the queue of the next fetch
(:meth:`QueueOrder.run`), so batching never tilts the shares.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: Separator between a queue and its weight in ``--queues``.
WEIGHT_SEPARATOR = ":"


@dataclass(frozen=True)
class QueueSelection:
    """The queues of ``--queues``, in the order given, and their weights.

    ``weights`` is ``None`` for a plain list (strict order), else a weight
    (an integer >= 1) for every queue.
    """

    queues: tuple[str, ...]
    weights: Mapping[str, int] | None = None


def parse_queues(text: str) -> QueueSelection:
    """Parse ``"a,b"`` (strict) or ``"a:5,b:1"`` (weighted) into a :class:`QueueSelection`.

    Whether the queues are declared is checked later (``Config.queues_named``).

    Raises:
        ValueError: no queue; an empty name; a queue named twice; a weight that is
            not an integer >= 1; some queues weighted and others not.
    """
    items = [item.strip() for item in text.split(",")]
    if not any(items):
        raise ValueError("name at least one queue")
    names: list[str] = []
    weights: dict[str, int] = {}
    for item in items:
        if not item:
            raise ValueError(f"empty queue name in {text!r}")
        name, sep, weight = (part.strip() for part in item.partition(WEIGHT_SEPARATOR))
        if not name:
            raise ValueError(f"empty queue name in {item!r}")
        if name in names:
            raise ValueError(f"queue {name!r} is named twice")
        names.append(name)
        if sep:
            weights[name] = _weight(name, weight)
    if weights and len(weights) != len(names):
        unweighted = ", ".join(n for n in names if n not in weights)
        raise ValueError(
            f"give every queue a weight or none (no weight: {unweighted}); "
            "'a,b' serves a strictly first, 'a:2,b:1' serves a about twice as often"
        )
    return QueueSelection(tuple(names), weights or None)


def _weight(name: str, text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"weight of queue {name!r} must be an integer >= 1, got {text!r}")
    return int(text)


class QueueOrder:
    """The order a worker tries its queues in, fetch after fetch.

    Strict (``weights`` ``None``): always ``queues`` as given, at no cost.
    Weighted: see the module docstring. ``rng``: the random source (tests
    pass a seeded one).

    Raises:
        ValueError: ``weights`` lacks a queue, names another one, or holds a weight < 1.
    """

    def __init__(
        self,
        queues: Sequence[str],
        weights: Mapping[str, int] | None = None,
        *,
        rng: random.Random | None = None,
    ) -> None:
        self.queues = list(queues)
        self.weights = dict(weights) if weights is not None else None
        if self.weights is not None:
            if set(self.weights) != set(self.queues):
                raise ValueError(f"weights {self.weights} do not match queues {self.queues}")
            if any(w < 1 for w in self.weights.values()):
                raise ValueError(f"weights must be >= 1, got {self.weights}")
        self._rng = rng or random.Random()  # noqa: S311 - fairness, not security
        #: The first choice of the next fetch, drawn already (it ended a run).
        self._carried: str | None = None

    @property
    def strict(self) -> bool:
        return self.weights is None

    def leads(self, queue: str) -> bool:
        """Whether a fetch may start with ``queue`` (strict: only the first queue)."""
        return self.weights is not None or queue == self.queues[0]

    def pick(self) -> str:
        """The first choice of the next fetch (weighted: a draw, or the one carried)."""
        if self.weights is None:
            return self.queues[0]
        if self._carried is not None:
            carried, self._carried = self._carried, None
            return carried
        return self._draw(self.queues)

    def order(self, first: str | None = None) -> list[str]:
        """The queues in the order to try them for one fetch, starting with ``first``
        (default: :meth:`pick`)."""
        if self.weights is None:
            return self.queues
        head = self.pick() if first is None else first
        rest = [q for q in self.queues if q != head]
        ordered = [head]
        while rest:
            ordered.append(self._draw(rest))
            rest.remove(ordered[-1])
        return ordered

    def run(self, queue: str, limit: int) -> int:
        """How many jobs of ``queue`` (which a draw chose already) to take at once, 1..``limit``.

        Strict: ``limit``. Weighted: 1 plus the number of further draws that
        choose ``queue`` in a row, up to ``limit``; the draw that ends the run
        is carried to the next :meth:`pick`.
        """
        if self.weights is None:
            return limit
        count = 1
        while count < limit:
            nxt = self._draw(self.queues)
            if nxt != queue:
                self._carried = nxt
                break
            count += 1
        return count

    def continue_with(self, queue: str, limit: int) -> int:
        """At the success of a ``queue`` job: how many more jobs of ``queue`` to reserve
        with its ack (``ack_reserve.lua``), 0..``limit``.

        Strict: ``limit``. Weighted: 0 when the next draw chose another queue
        (that draw is carried to the next :meth:`pick`), else :meth:`run`.
        """
        if self.weights is None:
            return limit
        nxt = self.pick()
        if nxt != queue:
            self._carried = nxt
            return 0
        return self.run(queue, limit)

    def quotas(self, slots: int) -> Counter[str] | None:
        """Weighted: how many of ``slots`` jobs each queue gets, one draw per slot
        (``None`` when strict: each queue in turn may fill them all)."""
        if self.weights is None:
            return None
        return Counter(self.pick() for _ in range(slots))

    def _draw(self, among: Sequence[str]) -> str:
        weights = self.weights or {}
        return self._rng.choices(among, [weights.get(q, 1) for q in among])[0]
