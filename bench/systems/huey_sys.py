"""Huey: calling the task / ``task.map()`` / ``task.schedule(delay=)``; ``huey_consumer``.

One worker: ``-w 1 -k thread``; two: ``-w 2 -k process``. Huey pops jobs
destructively (no reservation): a crash loses the running job.
"""

from __future__ import annotations

import time

from huey import RedisHuey

from bench.record import record
from bench.systems import System, paced, redis_url, venv_bin

huey = RedisHuey("bench", url=redis_url())


@huey.task()
def noop(sent: float, due: float, out: str) -> None:
    record(sent, due, out)


class Huey(System):
    def enqueue_one(self, n: int, out: str) -> None:
        for _ in range(n):
            noop(time.time(), 0.0, out)

    def enqueue_bulk(self, n: int, out: str) -> None:
        sent = time.time()
        noop.map([(sent, 0.0, out)] * n)

    def enqueue_paced(self, n: int, gap: float, out: str) -> None:
        for _ in paced(n, gap):
            noop(time.time(), 0.0, out)

    def enqueue_delayed(self, dues: list[float], out: str) -> None:
        for due in dues:
            noop.schedule(args=(time.time(), due, out), delay=max(0.0, due - time.time()))

    def worker_argvs(self, processes: int) -> list[list[str]]:
        kind = "thread" if processes == 1 else "process"
        return [
            [
                venv_bin("huey_consumer"),
                "bench.systems.huey_sys.huey",
                "-w",
                str(processes),
                "-k",
                kind,
            ]
        ]


def make() -> System:
    return Huey()
