"""Dramatiq's async actors (the ``AsyncIO`` middleware), for the async I/O drain only.

A broker of its own, so that the sync benchmark's broker keeps Dramatiq's
default middleware. Dramatiq runs an ``async def`` actor on one event loop
thread per process; each worker thread waits for the coroutine it submitted,
so ``-t`` threads give that many coroutines at once (Dramatiq's documented
model: https://dramatiq.io/cookbook.html, "Usage with asyncio").
Worker: ``dramatiq bench.systems.dramatiq_aio -p N -t 100 -Q bench_async``.
"""

from __future__ import annotations

import asyncio

import dramatiq
from dramatiq.brokers.redis import RedisBroker
from dramatiq.middleware.asyncio import AsyncIO

from bench.record import record
from bench.systems import ASYNC_SLEEP, redis_url

broker = RedisBroker(url=redis_url())
broker.add_middleware(AsyncIO())
dramatiq.set_broker(broker)


@dramatiq.actor(queue_name="bench_async", max_retries=0, broker=broker)
async def sleepy(sent: float, due: float, out: str) -> None:
    await asyncio.sleep(ASYNC_SLEEP)
    record(sent, due, out)
