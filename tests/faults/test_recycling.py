"""A child over ``--max-memory`` after a job is replaced by a fresh one; no job lost or run twice.

``fault_hog`` keeps 160 MiB alive in its process after it returns; with
``--max-memory 120`` the child exits after that job and the master forks a
fresh one. No job is lost and every job runs exactly once.
"""

from __future__ import annotations

from tests.jobs_app.jobs import fault_hog, fault_noop

from .harness import Faults


def test_memory_hog_child_is_recycled_and_no_job_is_lost(faults: Faults) -> None:
    worker = faults.worker(
        "--queues", "default", "--concurrency", "1", "--max-memory", "120", lease=1, grace=1
    )
    faults.wait_ready(worker)
    ids = []
    for round_ in range(3):
        ids += [
            j.id
            for j in fault_noop.delay_many(
                ((faults.ledger, f"a{round_}.{n}"), {}) for n in range(3)
            )
        ]
        ids.append(fault_hog.delay(faults.ledger, f"hog{round_}", 160).id)
    ids += [j.id for j in fault_noop.delay_many(((faults.ledger, f"z{n}"), {}) for n in range(3))]

    report = faults.wait_and_check(ids, timeout=30)

    assert set(report.states.values()) == {"succeeded"}
    assert report.duplicates == {}
    starts = faults.events("start")
    pids = [e["pid"] for e in starts]
    order = [e["tag"] for e in starts]
    # One child per stretch ending with a hog: 3 hogs -> 4 children, in order.
    segments: list[int] = []
    for pid in pids:
        if not segments or segments[-1] != pid:
            segments.append(pid)
    assert len(segments) == 4 == len(set(pids)), (order, pids)
    for round_ in range(3):
        hog = order.index(f"hog{round_}")
        assert pids[hog + 1] != pids[hog], "the hog's child was not replaced"
    assert worker.stderr().count("exiting (--max-memory)") == 3
    assert worker.pid not in pids and worker.alive()
