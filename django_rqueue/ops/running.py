"""The progress of the jobs the live workers run, as ``rqueue_info`` lists them: bounded reads."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from ..conf import get_config
from ..engine.connection import as_text, get_client, redis_errors
from ..engine.fields import JobFields
from ..engine.queue_ref import queue_ref
from ..exceptions import RedisUnavailable
from ..progress import Progress, read_progress
from .workers import WorkerInfo

#: The most running jobs listed; the others are counted, not read.
MAX_SHOWN = 50
#: The fields read of each running job.
FIELDS = (JobFields.NAME, JobFields.PROGRESS, JobFields.PROGRESS_AT)


@dataclasses.dataclass(frozen=True)
class RunningJob:
    """A job a live worker runs, with its latest progress (``None``: none reported, or its
    record could not be read)."""

    id: str
    name: str
    worker: str
    progress: Progress | None


def running_jobs(
    workers: Iterable[WorkerInfo], limit: int = MAX_SHOWN
) -> tuple[list[RunningJob], int]:
    """The first ``limit`` jobs the workers' heartbeats name (in their order), each read
    with one ``HMGET`` (pipelined per queue), and how many more they name.

    A queue whose Redis cannot be reached, or a record that is not a hash, leaves its jobs
    listed without a name or progress: never raises for them.
    """
    queues = get_config().queues
    named = [(w.id, j.id, j.queue) for w in workers for j in w.jobs if j.queue in queues]
    shown = named[:limit]
    fields: dict[str, list[bytes | None]] = {}
    for queue in dict.fromkeys(q for _, _, q in shown):
        ids = [job_id for _, job_id, q in shown if q == queue]
        fields.update(_read(queue, ids))
    jobs = []
    for worker, job_id, _queue in shown:
        name, progress, at = fields.get(job_id) or [None, None, None]
        record: dict[str, bytes | str] = {} if at is None else {JobFields.PROGRESS_AT: at}
        if progress is not None:
            record[JobFields.PROGRESS] = progress
        jobs.append(RunningJob(job_id, as_text(name), worker, read_progress(record, [])))
    return jobs, len(named) - len(shown)


def _read(queue: str, ids: list[str]) -> dict[str, list[bytes | None]]:
    keys, client = queue_ref(queue).keys, get_client(queue)
    try:
        with redis_errors(client):
            pipe = client.pipeline(transaction=False)
            for job_id in ids:
                pipe.hmget(keys.job(job_id), FIELDS)
            replies = pipe.execute(raise_on_error=False)
    except RedisUnavailable:
        return {}
    return {
        job_id: reply for job_id, reply in zip(ids, replies, strict=True) if isinstance(reply, list)
    }
