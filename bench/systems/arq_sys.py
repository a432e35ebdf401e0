"""arq: ``ArqRedis.enqueue_job`` (also ``_defer_until=``); no bulk API; ``arq`` worker (asyncio)."""

from __future__ import annotations

import asyncio
import datetime
import time
from typing import Any

from arq import create_pool
from arq.connections import RedisSettings

from bench.record import record
from bench.systems import ASYNC_CONCURRENCY, ASYNC_SLEEP, System, redis_url, venv_bin


async def noop(ctx: dict[str, Any], sent: float, due: float, out: str) -> None:
    record(sent, due, out)


async def sleepy(ctx: dict[str, Any], sent: float, due: float, out: str) -> None:
    await asyncio.sleep(ASYNC_SLEEP)
    record(sent, due, out)


class WorkerSettings:
    functions = [noop, sleepy]
    redis_settings = RedisSettings.from_dsn(redis_url())


class AsyncWorkerSettings:
    """The async I/O drain's worker: ``max_jobs`` coroutines at once (arq's default is 10).

    Not a subclass: arq reads only the class's own ``__dict__``.
    """

    functions = [noop, sleepy]
    redis_settings = WorkerSettings.redis_settings
    max_jobs = ASYNC_CONCURRENCY


class Arq(System):
    has_bulk = False
    has_async = True

    def _run(self, body: Any) -> None:
        async def main() -> None:
            pool = await create_pool(WorkerSettings.redis_settings)
            try:
                await body(pool)
            finally:
                await pool.aclose()

        asyncio.run(main())

    def enqueue_one(self, n: int, out: str) -> None:
        async def body(pool: Any) -> None:
            for _ in range(n):
                await pool.enqueue_job("noop", time.time(), 0.0, out)

        self._run(body)

    def enqueue_paced(self, n: int, gap: float, out: str) -> None:
        async def body(pool: Any) -> None:
            start = time.perf_counter()
            for i in range(n):
                left = start + i * gap - time.perf_counter()
                if left > 0:
                    await asyncio.sleep(left)
                await pool.enqueue_job("noop", time.time(), 0.0, out)

        self._run(body)

    def enqueue_delayed(self, dues: list[float], out: str) -> None:
        async def body(pool: Any) -> None:
            for due in dues:
                when = datetime.datetime.fromtimestamp(due, datetime.UTC)
                await pool.enqueue_job("noop", time.time(), due, out, _defer_until=when)

        self._run(body)

    def enqueue_async(self, n: int, out: str) -> None:
        async def body(pool: Any) -> None:
            sent = time.time()
            for _ in range(n):
                await pool.enqueue_job("sleepy", sent, 0.0, out)

        self._run(body)

    def async_worker_argvs(self, processes: int) -> list[list[str]]:
        return [[venv_bin("arq"), "bench.systems.arq_sys.AsyncWorkerSettings"]] * processes

    def worker_argvs(self, processes: int) -> list[list[str]]:
        return [[venv_bin("arq"), "bench.systems.arq_sys.WorkerSettings"]] * processes


def make() -> System:
    return Arq()
