"""Where one ``.delay()`` goes, measured interleaved against its parts and the ceiling.

Run in the bench venv (after ``python bench/run.py`` created it)::

    PYTHONPATH=. bench/.venv-peers/bin/python -m bench.enqueue_split [--rounds 40] [--chunk 100]

Each round runs ``--chunk`` calls of every probe below, one after the other,
in this process against a private ``redis-server``; the report gives each
probe's mean µs per call and its share of the two-write ``EVALSHA`` ceiling
(bench/ceiling.py) measured in the same rounds. The host's round trip swings
up to 10x between minutes: read the ratios.

- ``delay``: ``noop.delay(...)`` as the bench's enqueue one by one calls it;
- ``script only``: the same ``enqueue.lua`` call (same keys, arguments and
  payload) on the same dedicated connection, without the Python around it;
- ``python only``: ``.delay()`` with the script call replaced by a canned
  reply (everything but Redis; a tight loop, so it runs warmer than in situ);
- ``python + PING``: the same, each followed by one ``PING`` on the dedicated
  connection, and ``PING``: the ``PING`` alone. Their difference is the
  Python's cost in situ, where every call follows a context switch;
- ``task enqueue`` and ``task python only``: the same through ``django.tasks``
  (bench/tasks.py's ``noop_task.enqueue(...)``), with Redis and with the canned reply;
  ``task, no overlap``: with Redis, its ``TaskResult`` built before the write instead of
  while Redis runs it;
- ``huey``: Huey's enqueue (bench/systems/huey_sys.py), when installed;
- ``two-write EVALSHA``: the ceiling.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import time
from collections.abc import Callable
from typing import Any

from tests.support.redis_server import RedisServer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--chunk", type=int, default=100)
    args = parser.parse_args()

    server = RedisServer().start()
    os.environ["BENCH_REDIS_URL"] = server.url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    import django

    django.setup()
    from bench.ceiling import Ceiling
    from bench.jobs import noop
    from bench.tasks import noop_task
    from django_rqueue.engine import scripts
    from django_rqueue.engine.connection import get_client
    from django_rqueue.engine.dedicated import execute

    client = get_client("bench")
    enqueue = scripts.load("enqueue")
    base = "rqueue:{bench}:"
    canned = [b"created", b"bench:" + b"x" * 22, b"queued"]
    real_call = scripts.LuaScript.__call__
    ceiling = Ceiling(server.url)
    noop.delay(0.0, 0.0, "")  # load the script, open the connections

    def delay(n: int) -> None:
        for _ in range(n):
            noop.delay(0.0, 0.0, "")

    def script_only(n: int) -> None:
        for _ in range(n):
            job_id = "bench:" + secrets.token_urlsafe(16)
            payload = json.dumps([0.0, 0.0, ""], separators=(",", ":"))
            keys = [base, f"{base}job:{job_id}"]
            argv = [job_id, 0, "", 0, -1, "", 0, "n", noop.name, "p", payload]
            execute(client, "EVALSHA", enqueue.sha, len(keys), *keys, *argv)

    def canned_call(
        self: Any, c: Any, keys: Any, argv: Any, meanwhile: Callable[[], object] | None = None
    ) -> Any:
        if meanwhile is not None:
            meanwhile()  # what .delay() does while Redis runs the script
        return canned

    def stubbed(body: Callable[[], None]) -> Callable[[int], None]:
        def run(n: int) -> None:
            scripts.LuaScript.__call__ = canned_call  # type: ignore[method-assign]
            try:
                for _ in range(n):
                    body()
            finally:
                scripts.LuaScript.__call__ = real_call  # type: ignore[method-assign]

        return run

    def without_overlap(body: Callable[[], object]) -> Callable[[int], None]:
        """``body`` with the backend's TaskResult built before the write, not during it."""
        from django_rqueue import enqueue as enqueuing

        real_submit = enqueuing.submit

        def submit(
            job_function: Any,
            args: Any,
            kwargs: Any,
            options: Any = None,
            fields: Any = None,
            overlap: Callable[[], object] | None = None,
        ) -> Any:
            if overlap is not None:
                overlap()
            return real_submit(job_function, args, kwargs, options, fields)

        def run(n: int) -> None:
            enqueuing.submit = submit  # type: ignore[assignment]
            try:
                for _ in range(n):
                    body()
            finally:
                enqueuing.submit = real_submit

        return run

    def task_enqueue(n: int) -> None:  # a loop as delay's: no list of n results kept
        for _ in range(n):
            noop_task.enqueue(0.0, 0.0, "")

    def ping(n: int) -> None:
        for _ in range(n):
            execute(client, "PING")

    probes: dict[str, Callable[[int], None]] = {
        "delay": delay,
        "script only": script_only,
        "python only": stubbed(lambda: noop.delay(0.0, 0.0, "")),
        "python + PING": stubbed(lambda: (noop.delay(0.0, 0.0, ""), execute(client, "PING"))),
        "PING": ping,
        "task enqueue": task_enqueue,
        "task python only": stubbed(lambda: noop_task.enqueue(0.0, 0.0, "")),
        "task, no overlap": without_overlap(lambda: noop_task.enqueue(0.0, 0.0, "")),
    }
    try:
        from bench.systems import huey_sys

        huey: Any = huey_sys.make()
        probes["huey"] = lambda n: huey.enqueue_one(n, "")
    except ImportError:
        pass
    probes["two-write EVALSHA"] = ceiling._evalsha_two_writes

    spent = dict.fromkeys(probes, 0.0)
    try:
        for round_ in range(args.rounds):
            for name, probe in probes.items():
                started = time.perf_counter()
                probe(args.chunk)
                spent[name] += time.perf_counter() - started
            if round_ % 10 == 9:
                server.client().flushall()
                noop.delay(0.0, 0.0, "")
    finally:
        ceiling.close()
        server.close()
    calls = args.rounds * args.chunk
    ceiling_us = spent["two-write EVALSHA"] / calls * 1e6
    print(f"{calls} calls per probe, interleaved in chunks of {args.chunk}")
    for name, seconds in spent.items():
        us = seconds / calls * 1e6
        print(f"  {name:<18} {us:7.1f} µs/call  {ceiling_us / us:6.0%} of the two-write ceiling")
    in_situ = (spent["python + PING"] - spent["PING"]) / calls * 1e6
    print(f"  python in situ     {in_situ:7.1f} µs/call (python + PING − PING)")


if __name__ == "__main__":
    main()
