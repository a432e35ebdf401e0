"""Celery: ``task.delay`` / ``group(...).apply_async()`` / ``apply_async(eta=)`` / ``chord``;
prefork worker. Chords need a result backend: Celery's Redis backend, on the bench's Redis."""

from __future__ import annotations

import datetime
import time

from celery import Celery, chord, group

from bench.record import record
from bench.systems import System, paced, redis_url, venv_bin

app = Celery("bench", broker=redis_url(), backend=redis_url())
app.conf.update(
    task_ignore_result=True,
    task_default_queue="bench",
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
)


@app.task(name="bench.noop")
def noop(sent: float, due: float, out: str) -> None:
    record(sent, due, out)


@app.task(name="bench.member", ignore_result=False)
def member(sent: float, out: str) -> int:
    record(sent, 0.0, out)
    return 1


@app.task(name="bench.body", ignore_result=False)
def body(results: list[int], sent: float, out: str) -> None:
    record(sent, -1.0, out)


class CelerySystem(System):
    has_workflows = True

    def after_flush(self) -> None:
        # FLUSHALL dropped kombu's queue binding; publishing caches "declared",
        # so declare it again or messages sent before a worker starts are lost.
        with app.connection_for_write() as conn:
            app.amqp.queues["bench"].bind(conn.default_channel).declare()

    def enqueue_one(self, n: int, out: str) -> None:
        for _ in range(n):
            noop.delay(time.time(), 0.0, out)

    def enqueue_bulk(self, n: int, out: str) -> None:
        sent = time.time()
        group(noop.s(sent, 0.0, out) for _ in range(n)).apply_async()

    def enqueue_paced(self, n: int, gap: float, out: str) -> None:
        for _ in paced(n, gap):
            noop.delay(time.time(), 0.0, out)

    def enqueue_delayed(self, dues: list[float], out: str) -> None:
        for due in dues:
            when = datetime.datetime.fromtimestamp(due, datetime.UTC)
            noop.apply_async((time.time(), due, out), eta=when)

    def enqueue_chord(self, n: int, out: str) -> None:
        sent = time.time()
        chord(member.s(sent, out) for _ in range(n))(body.s(sent, out))

    def worker_argvs(self, processes: int) -> list[list[str]]:
        return [
            [
                venv_bin("celery"),
                "-A",
                "bench.systems.celery_sys",
                "worker",
                "-P",
                "prefork",
                "-c",
                str(processes),
                "-Q",
                "bench",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ]
        ]


def make() -> System:
    return CelerySystem()
