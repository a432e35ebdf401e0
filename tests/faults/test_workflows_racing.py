"""The two last inputs of a chord end at the same instant in two worker processes, 400 times:
each body is released once, with both values, in member order.

Eight worker children (two ``rqueue_work --concurrency 4``) run rounds of four two-member
chords. Every member of a round waits for the round's gate file: once all eight have
started, the file is created and they end together, so the two acks of each chord reach
Redis within a few milliseconds of each other, from two processes. Only one of them can
find the other input arrived (the scripts of one slot run one at a time): the body is
queued once, by whichever came second, and never lost between the two. Both paths
(``dep_path``): on the outbox path the two arrivals race through the pollers' relays.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest

from django_rqueue.workflows import chord
from tests.jobs_app.workflow_jobs import tag_of, wf_collect, wf_gate
from tests.workflows.conftest import dep_path  # noqa: F401 (a fixture: both paths)

from .harness import Faults, wait_until

#: Chords per round (two members each: the eight children of the two workers).
PER_ROUND = 4
ROUNDS = 100


@pytest.mark.slow
@pytest.mark.usefixtures("dep_path")
def test_two_last_inputs_ending_together_release_each_body_once(
    faults: Faults, tmp_path: Path
) -> None:
    workers = [faults.worker("--queues", "default", "--concurrency", "4") for _ in range(2)]
    for worker in workers:
        faults.wait_ready(worker)
    ids: list[str] = []
    for r in range(ROUNDS):
        gate = str(tmp_path / f"gate{r}")
        tags = {f"r{r}c{c}{side}" for c in range(PER_ROUND) for side in "ab"}
        for c in range(PER_ROUND):
            members = [wf_gate.si(faults.ledger, f"r{r}c{c}{side}", gate) for side in "ab"]
            ids.append(chord(members, wf_collect.s(faults.ledger, f"r{r}c{c}")).delay().id)
        # Every member of the round runs (and waits) before any of them ends.
        wait_until(
            partial(all_started, faults, tags),
            timeout=30,
            interval=0.005,
            message=f"round {r}: not every member started",
        )
        Path(gate).touch()

    faults.wait_workflows(ids, timeout=60)
    report = faults.check_workflows(ids)
    bodies = [report.node_ids(w)[-1] for w in ids]
    assert all(report.nodes.starts[body] == 1 for body in bodies)
    for r in range(ROUNDS):
        for c in range(PER_ROUND):
            body = bodies[r * PER_ROUND + c]
            [received] = report.received[body]
            assert [tag_of(v) for v in received] == [f"r{r}c{c}{s}" for s in "ab"]
    # Both members of every chord ran at once (each started before either ended), so in two
    # processes; how close their ends were is printed, not asserted (the machine's load).
    starts = {e["id"]: e for e in faults.events("start")}
    ends = {e["id"]: e for e in faults.events("end")}
    close = 0
    for w in ids:
        a, b = report.node_ids(w)[:2]
        assert max(starts[a]["t"], starts[b]["t"]) < min(ends[a]["t"], ends[b]["t"])
        assert starts[a]["pid"] != starts[b]["pid"]
        close += abs(ends[a]["t"] - ends[b]["t"]) < 0.02
    print(f"{len(ids)} chords; their members ended within 20 ms of each other in {close}")
    assert all(worker.alive() for worker in workers)


def all_started(faults: Faults, tags: set[str]) -> bool:
    return tags <= {e["tag"] for e in faults.events("start")}
