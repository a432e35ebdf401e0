"""Put jobs in any state on a queue through the real transitions (admin and command tests)."""

from __future__ import annotations

from typing import Any

import redis

from django_rqueue.engine import transitions
from django_rqueue.engine.keys import QueueKeys, new_job_id
from django_rqueue.execution import error_record

PREFIX = "rqueue"


class Jobs:
    """Puts jobs in a given state on a queue through the real transitions."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    def keys(self, queue: str = "default") -> QueueKeys:
        return QueueKeys.of(PREFIX, queue)

    def queued(
        self,
        *,
        queue: str = "default",
        name: str = "tests.jobs_app.jobs.record",
        group: str = "",
        priority: int = 0,
        delay_ms: int = 0,
        payload: str = '{"a": ["/dev/null", "x"], "k": {}}',
        max_attempts: int = 1,
    ) -> str:
        job_id = new_job_id(queue)
        outcome, _, _ = transitions.enqueue(
            self.client,
            self.keys(queue),
            job_id=job_id,
            priority=priority,
            group=group,
            delay_ms=delay_ms,
            run_at_ms=-1,
            unique_key="",
            unique_ttl=0,
            fields={
                "n": name,
                "p": payload,
                "max": max_attempts,
                "tmo": 30_000,
                "ttl": 600,
            },
        )
        assert outcome == "created"
        return job_id

    def scheduled(self, **kwargs: Any) -> str:
        return self.queued(delay_ms=3_600_000, **kwargs)

    def running(self, queue: str = "default", **kwargs: Any) -> str:
        # Priority 100 so that this job, not an older queued one, is reserved.
        kwargs.setdefault("priority", 100)
        job_id = self.queued(queue=queue, **kwargs)
        got = transitions.reserve(self.client, self.keys(queue), lease_ms=60_000, worker_id="w1")
        assert got is not None and got[0] == job_id
        return job_id

    def failed(self, queue: str = "default", message: str = "boom", **kwargs: Any) -> str:
        job_id = self.running(queue, **kwargs)
        err = error_record(ValueError(message), f"Traceback (most recent call last):\n{message}\n")
        assert transitions.fail(self.client, self.keys(queue), job_id, 1, err, -1)[0] == "failed"
        return job_id

    def succeeded(self, queue: str = "default", **kwargs: Any) -> str:
        job_id = self.running(queue, **kwargs)
        transitions.ack(self.client, self.keys(queue), job_id, 1, '{"ok": 1}', 600)
        return job_id

    def state(self, job_id: str, queue: str = "default") -> str | None:
        value = self.client.hget(self.keys(queue).job(job_id), "s")
        return value.decode() if isinstance(value, bytes) else value
