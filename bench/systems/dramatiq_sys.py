"""Dramatiq: ``actor.send`` / ``group(...).run()`` / ``send_with_options(delay=)``.

Worker: ``dramatiq -p N -t 2`` (N processes of 2 threads each).
"""

from __future__ import annotations

import time

import dramatiq
from dramatiq.brokers.redis import RedisBroker

from bench.record import record
from bench.systems import ASYNC_CONCURRENCY, System, paced, redis_url, venv_bin

broker = RedisBroker(url=redis_url())
dramatiq.set_broker(broker)


@dramatiq.actor(queue_name="bench", max_retries=0)
def noop(sent: float, due: float, out: str) -> None:
    record(sent, due, out)


class Dramatiq(System):
    has_async = True

    def enqueue_one(self, n: int, out: str) -> None:
        for _ in range(n):
            noop.send(time.time(), 0.0, out)

    def enqueue_bulk(self, n: int, out: str) -> None:
        sent = time.time()
        dramatiq.group(noop.message(sent, 0.0, out) for _ in range(n)).run()

    def enqueue_paced(self, n: int, gap: float, out: str) -> None:
        for _ in paced(n, gap):
            noop.send(time.time(), 0.0, out)

    def enqueue_delayed(self, dues: list[float], out: str) -> None:
        for due in dues:
            delay_ms = max(0, int((due - time.time()) * 1000))
            noop.send_with_options(args=(time.time(), due, out), delay=delay_ms)

    def enqueue_async(self, n: int, out: str) -> None:
        from bench.systems.dramatiq_aio import broker as aio_broker
        from bench.systems.dramatiq_aio import sleepy

        sent = time.time()
        dramatiq.group((sleepy.message(sent, 0.0, out) for _ in range(n)), broker=aio_broker).run()

    def async_worker_argvs(self, processes: int) -> list[list[str]]:
        return [
            [
                venv_bin("dramatiq"),
                "bench.systems.dramatiq_aio",
                "-p",
                str(processes),
                "-t",
                str(ASYNC_CONCURRENCY),
                "-Q",
                "bench_async",
            ]
        ]

    def worker_argvs(self, processes: int) -> list[list[str]]:
        return [
            [
                venv_bin("dramatiq"),
                "bench.systems.dramatiq_sys",
                "-p",
                str(processes),
                "-t",
                "2",
                "-Q",
                "bench",
            ]
        ]


def make() -> System:
    return Dramatiq()
