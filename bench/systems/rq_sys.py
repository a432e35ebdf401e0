"""RQ: ``Queue.enqueue`` / ``enqueue_many`` / ``enqueue_at`` / ``depends_on``; SimpleWorker.

RQ's default worker forks a child per job (~30 jobs/s); SimpleWorker runs
jobs in the worker process, as every other system here does.
"""

from __future__ import annotations

import datetime
import time

from redis import Redis
from rq import Queue

from bench.record import record
from bench.systems import System, paced, redis_url, venv_bin


def noop(sent: float, due: float, out: str) -> None:
    record(sent, due, out)


def member(sent: float, out: str) -> int:
    record(sent, 0.0, out)
    return 1


def body(sent: float, out: str) -> None:
    record(sent, -1.0, out)


class RQ(System):
    has_workflows = True

    def __init__(self) -> None:
        self.redis = Redis.from_url(redis_url())
        self.queue = Queue("bench", connection=self.redis)

    def enqueue_one(self, n: int, out: str) -> None:
        for _ in range(n):
            self.queue.enqueue(noop, time.time(), 0.0, out)

    def enqueue_bulk(self, n: int, out: str) -> None:
        sent = time.time()
        for start in range(0, n, 1000):
            datas = [
                Queue.prepare_data(noop, (sent, 0.0, out)) for _ in range(min(1000, n - start))
            ]
            self.queue.enqueue_many(datas)

    def enqueue_paced(self, n: int, gap: float, out: str) -> None:
        for _ in paced(n, gap):
            self.queue.enqueue(noop, time.time(), 0.0, out)

    def enqueue_delayed(self, dues: list[float], out: str) -> None:
        for due in dues:
            when = datetime.datetime.fromtimestamp(due, datetime.UTC)
            self.queue.enqueue_at(when, noop, time.time(), due, out)

    def enqueue_chord(self, n: int, out: str) -> None:
        sent = time.time()
        members = []
        for start in range(0, n, 1000):
            datas = [Queue.prepare_data(member, (sent, out)) for _ in range(min(1000, n - start))]
            members += self.queue.enqueue_many(datas)
        self.queue.enqueue(body, sent, out, depends_on=members)

    def worker_argvs(self, processes: int) -> list[list[str]]:
        argv = [
            venv_bin("rq"),
            "worker",
            "-w",
            "rq.worker.SimpleWorker",
            "-u",
            redis_url(),
            "bench",
        ]
        # One scheduler is enough (RQ elects one anyway).
        return [[*argv[:2], "--with-scheduler", *argv[2:]]] + [argv] * (processes - 1)

    def close(self) -> None:
        self.redis.close()


def make() -> System:
    return RQ()
