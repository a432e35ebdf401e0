"""Put jobs in any state on a queue through the real transitions (the ``jobs`` fixture).

The one way the tests do it: :func:`enqueue_raw` and the transition tests'
``Engine`` enqueue through :meth:`Jobs.enqueue` too.
"""

from __future__ import annotations

from typing import Any

import redis

from django_rqueue.conf import get_config
from django_rqueue.engine import calls
from django_rqueue.engine.calls import Retention
from django_rqueue.engine.connection import get_client
from django_rqueue.engine.fields import JobFields
from django_rqueue.engine.keys import QueueKeys, new_job_id
from django_rqueue.engine.replies import Enqueued
from django_rqueue.execution import error_record
from tests.support import transitions


def retention(queue: str = "default") -> Retention:
    """The failed store's retention of ``queue``, as the settings say (what workers pass)."""
    return Retention.of(get_config().queue(queue))


class Jobs:
    """Puts jobs in a given state on a queue through the real transitions."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    def keys(self, queue: str = "default") -> QueueKeys:
        return QueueKeys.of(get_config().key_prefix, queue)

    def enqueue(
        self,
        *,
        queue: str = "default",
        name: str = "tests.jobs_app.jobs.record",
        group: str = "",
        priority: int = 0,
        delay_ms: int = 0,
        payload: str = '{"a": ["/dev/null", "x"], "k": {}}',
        max_attempts: int | None = 1,
        job_id: str | None = None,
        run_at_ms: int = -1,
        unique_key: str = "",
        unique_ttl: int = 0,
        timeout_ms: int | None = 30_000,
        ttl: int | None = 600,
        expires_in_ms: int = -1,
        expires_at_ms: int = -1,
    ) -> Enqueued:
        """Enqueue one job; returns ``(outcome, job id, state)`` as the script answered.

        ``expires_in_ms`` (from the enqueue, Redis clock) or ``expires_at_ms`` (ms since
        the epoch): the job's expiry (``-1``: none).
        """
        job_id = job_id or new_job_id(queue)
        fields: dict[str, str | int] = {JobFields.NAME: name, JobFields.PAYLOAD: payload}
        for field, value in (
            (JobFields.MAX_ATTEMPTS, max_attempts),
            (JobFields.TIMEOUT_MS, timeout_ms),
            (JobFields.RESULT_TTL, ttl),
        ):
            if value is not None:  # None: left out, as enqueues do at RECORD_DEFAULTS
                fields[field] = value
        if expires_in_ms >= 0:
            fields[JobFields.EXPIRES_IN] = expires_in_ms
        if expires_at_ms >= 0:
            fields[JobFields.EXPIRES] = expires_at_ms
        job = calls.NewJob(job_id, priority, group, unique_key, unique_ttl, fields)
        call = calls.enqueue(self.keys(queue), job, delay_ms=delay_ms, run_at_ms=run_at_ms)
        return transitions.enqueue(self.client, call)[:3]  # without the enqueue time

    def queued(self, queue: str = "default", **kwargs: Any) -> str:
        """Enqueue and return the new job's id (asserting it was created)."""
        outcome, job_id, _ = self.enqueue(queue=queue, **kwargs)
        assert outcome == "created"
        return job_id

    def scheduled(self, queue: str = "default", **kwargs: Any) -> str:
        kwargs.setdefault("delay_ms", 3_600_000)
        return self.queued(queue, **kwargs)

    def running(self, queue: str = "default", **kwargs: Any) -> str:
        # Priority 100 so that this job, not an older queued one, is reserved.
        kwargs.setdefault("priority", 100)
        job_id = self.queued(queue, **kwargs)
        got = transitions.reserve(self.client, self.keys(queue), lease_ms=60_000, worker_id="w1")
        assert got is not None and got[0] == job_id
        return job_id

    def failed(self, queue: str = "default", message: str = "boom", **kwargs: Any) -> str:
        job_id = self.running(queue, **kwargs)
        err = error_record(ValueError(message), f"Traceback (most recent call last):\n{message}\n")
        keys, kept = self.keys(queue), retention(queue)
        assert (
            transitions.fail(self.client, keys, job_id, 1, err, -1, retention=kept)[0] == "failed"
        )
        return job_id

    def succeeded(self, queue: str = "default", **kwargs: Any) -> str:
        job_id = self.running(queue, **kwargs)
        transitions.ack(self.client, self.keys(queue), job_id, 1, '{"ok": 1}', 600)
        return job_id

    def state(self, job_id: str, queue: str = "default") -> str | None:
        value = self.client.hget(self.keys(queue).job(job_id), "s")
        return value.decode() if isinstance(value, bytes) else value


def enqueue_raw(name: str, payload: str, queue: str = "default") -> str:
    """Write a job the way ``.delay()`` does, but with any name and payload."""
    outcome, job_id, state = Jobs(get_client(queue)).enqueue(
        queue=queue, name=name, payload=payload, max_attempts=3, timeout_ms=60_000
    )
    assert (outcome, state) == ("created", "queued")
    return job_id
