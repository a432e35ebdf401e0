"""Fixtures for the admin tests: users with given permissions, jobs in any state."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis
from django.contrib.auth.models import Permission
from django.test import Client

from django_rqueue import transitions
from django_rqueue.execution import error_record
from django_rqueue.keys import QueueKeys, new_job_id

PREFIX = "rqueue"
BASE = "/admin/django_rqueue/job/"


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
                "name": name,
                "queue": queue,
                "payload": payload,
                "max_attempts": max_attempts,
                "timeout_ms": 30_000,
                "result_ttl": 600,
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
        value = self.client.hget(self.keys(queue).job(job_id), "state")
        return value.decode() if isinstance(value, bytes) else value


@pytest.fixture
def jobs(rqueue_redis: redis.Redis) -> Jobs:
    return Jobs(rqueue_redis)


MakeClient = Callable[..., Client]


@pytest.fixture
def make_client(django_user_model: Any, db: None) -> MakeClient:  # noqa: ANN401
    """``make_client(*codenames, superuser=False, staff=True, csrf=False)``: a logged-in client."""
    count = [0]

    def make(
        *codenames: str, superuser: bool = False, staff: bool = True, csrf: bool = False
    ) -> Client:
        count[0] += 1
        user = django_user_model.objects.create_user(
            f"user{count[0]}", password="pw", is_staff=staff, is_superuser=superuser
        )
        for codename in codenames:
            user.user_permissions.add(
                Permission.objects.get(content_type__app_label="django_rqueue", codename=codename)
            )
        client = Client(enforce_csrf_checks=csrf)
        client.force_login(user)
        return client

    return make


@pytest.fixture
def admin_client_rq(make_client: MakeClient) -> Client:
    """A superuser's client."""
    return make_client(superuser=True)
