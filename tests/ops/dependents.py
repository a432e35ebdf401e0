"""Write the Redis state of dependencies as the transition scripts will (issue 26): waiting
jobs, outbox entries and the workflow and dependency counters of a queue's ``stats`` hash.

The read side (counts, listings, metrics, ``rqueue_info``, the admin) is tested on this
state while the scripts that create it are written; every name comes from
:class:`~django_rqueue.engine.keys.QueueKeys` and :mod:`django_rqueue.engine.fields`.
"""

from __future__ import annotations

import redis

from django_rqueue.engine.fields import JobFields, StatsFields
from django_rqueue.job import JobStatus
from tests.support.jobs_in_state import Jobs

#: How far ahead the default dependency deadline of :func:`waiting` lies (ms).
DEADLINE_IN_MS = 7 * 24 * 3600 * 1000


def waiting(
    jobs: Jobs,
    queue: str = "default",
    *,
    deadline_ms: float | None = None,
    inputs: tuple[str, ...] = ("default:input-a", "default:input-b"),
    missing: int | None = None,
    name: str = "tests.jobs_app.jobs.record",
) -> str:
    """A job in state ``waiting`` on ``queue``: its record (created by a real enqueue, then
    taken out of ``delayed``) with ``s=waiting`` and its inputs' fields, and its id in the
    queue's ``waiting`` zset scored by ``deadline_ms`` (ms, Redis clock; default: a week
    from now; ``float("inf")``: no deadline). Returns its id."""
    keys, client = jobs.keys(queue), jobs.client
    job_id = jobs.scheduled(queue, name=name, delay_ms=DEADLINE_IN_MS)
    if deadline_ms is None:
        seconds, micros = client.time()
        deadline_ms = int(seconds) * 1000 + int(micros) // 1000 + DEADLINE_IN_MS
    with client.pipeline(transaction=True) as pipe:
        pipe.zrem(keys.delayed, job_id)
        pipe.zadd(keys.waiting, {job_id: deadline_ms})
        pipe.hset(
            keys.job(job_id),
            mapping={
                JobFields.STATE: JobStatus.WAITING.value,
                JobFields.INPUT_COUNT: len(inputs),
                JobFields.INPUTS_MISSING: len(inputs) if missing is None else missing,
                JobFields.INPUT_IDS: " ".join(inputs),
            },
        )
        pipe.execute()
    return job_id


def outbox_entry(client: redis.Redis, jobs: Jobs, queue: str = "default", *, at: str = "*") -> str:
    """``XADD <queue base>outbox <at> d <dependent> x 1 v s1:`` as a terminal script of one of
    ``queue``'s jobs writes it for a dependent on another queue; returns the entry id
    (``<ms>-<seq>``: give ``at`` to choose the time it was written)."""
    entry = client.xadd(
        jobs.keys(queue).outbox, {"d": "emails:dependent", "x": 1, "v": "s1:"}, id=at
    )
    return entry.decode() if isinstance(entry, bytes) else str(entry)


def count(
    client: redis.Redis, jobs: Jobs, counter: str, by: int = 1, queue: str = "default"
) -> None:
    """``HINCRBY`` one of :attr:`StatsFields.WORKFLOW_COUNTERS` of ``queue``, as a script does."""
    assert counter in StatsFields.WORKFLOW_COUNTERS
    client.hincrby(jobs.keys(queue).stats, counter, by)
