"""django-rqueue: ``.delay()`` / ``.delay_many()`` / ``chord``; worker ``manage.py rqueue_work``."""

from __future__ import annotations

import datetime
import os
import subprocess
import time
from functools import cache

from bench.systems import ASYNC_CONCURRENCY, PYTHON, REPO, System, paced


@cache
def has_concurrency() -> bool:
    """Whether ``rqueue_work`` has the prefork supervisor's ``--concurrency``."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "bench.settings", "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [PYTHON, "-m", "django", "rqueue_work", "--help"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        cwd=REPO,
    )
    return "--concurrency" in proc.stdout


class Rqueue(System):
    has_async = True
    has_tasks = True
    has_workflows = True

    def __init__(self) -> None:
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
        import django

        django.setup()
        from bench.jobs import body, member, noop, sleepy

        self.noop = noop
        self.sleepy = sleepy
        self.member = member
        self.body = body

    def enqueue_one(self, n: int, out: str) -> None:
        delay = self.noop.delay
        for _ in range(n):
            delay(time.time(), 0.0, out)

    def enqueue_bulk(self, n: int, out: str) -> None:
        sent = time.time()
        self.noop.delay_many([((sent, 0.0, out), {}) for _ in range(n)])

    def enqueue_paced(self, n: int, gap: float, out: str) -> None:
        for _ in paced(n, gap):
            self.noop.delay(time.time(), 0.0, out)

    def enqueue_delayed(self, dues: list[float], out: str) -> None:
        for due in dues:
            when = datetime.datetime.fromtimestamp(due, datetime.UTC)
            self.noop.using(run_at=when).delay(time.time(), due, out)

    def enqueue_chord(self, n: int, out: str) -> None:
        from django_rqueue.workflows import chord

        sent = time.time()
        chord([self.member.s(sent, out) for _ in range(n)], self.body.s(sent, out)).delay()

    def enqueue_async(self, n: int, out: str) -> None:
        sent = time.time()
        self.sleepy.delay_many([((sent, 0.0, out), {}) for _ in range(n)])

    def async_worker_argvs(self, processes: int) -> list[list[str]]:
        argv = [PYTHON, "-m", "django", "rqueue_work", "--queues", "bench"]
        slots = str(ASYNC_CONCURRENCY)
        return [[*argv, "--concurrency", str(processes), "--async-concurrency", slots]]

    def enqueue_tasks(self, n: int, out: str) -> None:
        from bench.tasks import noop_task

        enqueue = noop_task.enqueue
        for _ in range(n):
            enqueue(time.time(), 0.0, out)

    def worker_argvs(self, processes: int) -> list[list[str]]:
        argv = [PYTHON, "-m", "django", "rqueue_work", "--queues", "bench"]
        if has_concurrency():
            return [[*argv, "--concurrency", str(processes)]]
        return [argv] * processes

    def worker_env(self) -> dict[str, str]:
        return {"DJANGO_SETTINGS_MODULE": "bench.settings"}

    def close(self) -> None:
        from django_rqueue.engine.connection import reset_clients

        reset_clients()


def make() -> System:
    return Rqueue()
