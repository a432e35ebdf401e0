"""Real ``rqueue_work``, ``rqueue_poller`` and ``rqueue_info --check`` processes logged in as
Redis users that lack part of the ACL line of docs/howto/secure.md.

- a key pattern that does not cover ``KEY_PREFIX``: the worker and the poller refuse to
  start (``rqueue.E121``, naming the server without its password and the pattern to add),
  ``--check`` answers CRITICAL (exit 2); nothing crashes with a traceback.
- missing commands: the worker refuses, naming them (``rqueue.E120``).
- no ``CLIENT UNBLOCK``, a worker on two servers: it warns once per server, picks up
  every job promptly, and sends no refused ``CLIENT UNBLOCK`` while it runs.
"""

from __future__ import annotations

import json
import statistics
import time

import redis

from django_rqueue.engine.permissions import acl_rules
from tests.jobs_app.jobs import fault_noop
from tests.support.redis_server import RedisServer

from .harness import STARTUP, Faults

PASSWORD = "s3cret-pw"
#: A wake-up this fast cannot come from the idle wait's timeout (4 s).
PROMPT = 1.0


def user_url(server: RedisServer, name: str, rules: list[str]) -> str:
    """Create the user ``name`` with ``rules`` on ``server``; its URL there."""
    with server.client() as admin:
        admin.execute_command("ACL", "SETUSER", name, "reset", "on", f">{PASSWORD}", *rules)
        admin.acl_log_reset()
    return f"redis://{name}:{PASSWORD}@127.0.0.1:{server.port}/0"


def refused(server: RedisServer, name: str, command: str) -> int:
    """How many times ``server`` refused ``command`` to ``name`` since its log was reset."""
    with server.client() as admin:
        return sum(
            int(entry["count"])
            for entry in admin.acl_log()
            if entry.get("username") == name and entry.get("object") == command
        )


def test_a_key_pattern_that_misses_the_prefix_is_refused_by_worker_poller_and_check(
    faults: Faults, redis_server: RedisServer
) -> None:
    url = user_url(redis_server, "elsewhere", ["~other:*", *acl_rules("rqueue")[1:]])
    worker = faults.worker("--queues", "default", "--concurrency", "1", redis_url=url)
    poller = faults.command("rqueue_poller", redis_url=url)
    check = faults.command("rqueue_info", "--check", redis_url=url)

    server = f"Redis at redis://elsewhere@127.0.0.1:{redis_server.port}/0"
    for process in (worker, poller):
        assert process.wait(timeout=STARTUP) != 0
        stderr = process.stderr()
        assert "rqueue.E121" in stderr and server in stderr, stderr
        assert "~rqueue:*" in stderr  # what to add
        assert PASSWORD not in stderr
        assert "Traceback" not in stderr, "a clear message, not a crash"
    assert "serving" not in worker.stderr(), "a child was started anyway"

    assert check.wait(timeout=STARTUP) == 2
    output = check.stdout()
    assert output.startswith("RQUEUE CRITICAL"), output
    assert "rqueue.E121" in output and "Traceback" not in check.stderr()


def test_missing_commands_are_named_and_the_worker_refuses_to_start(
    faults: Faults, redis_server: RedisServer
) -> None:
    url = user_url(redis_server, "lacking", [*acl_rules("rqueue"), "-hset", "-zadd"])
    worker = faults.worker("--queues", "default", "--concurrency", "1", redis_url=url)

    assert worker.wait(timeout=STARTUP) != 0
    stderr = worker.stderr()
    assert "rqueue.E120" in stderr and "may not run hset, zadd" in stderr, stderr
    assert "+hset +zadd" in stderr
    assert "serving" not in stderr and "Traceback" not in stderr


def test_without_client_unblock_a_worker_on_two_servers_warns_once_and_picks_up_jobs(
    faults: Faults,
    rqueue_redis: redis.Redis,
    redis_server: RedisServer,
    other_redis_server: RedisServer,
) -> None:
    rules = [*acl_rules("rqueue"), "-client|unblock"]
    url = user_url(redis_server, "nounblock", rules)
    other = user_url(other_redis_server, "nounblock", rules)
    env = {"RQUEUE_TEST_QUEUE_OPTIONS": json.dumps({"emails": {"REDIS_URL": other}})}
    worker = faults.worker(
        "--queues", "default,emails", "--concurrency", "2", lease=2, env=env, redis_url=url
    )
    faults.wait_ready(worker)
    for server in (redis_server, other_redis_server):
        with server.client() as admin:
            admin.acl_log_reset()  # the startup check's own probe was refused once: forget it

    waits = []
    for n, queue in enumerate(["default", "emails"] * 5):
        enqueued = time.time()
        fault_noop.using(queue=queue).delay(faults.ledger, f"{queue}-{n}")
        start = faults.wait_event("start", tag=f"{queue}-{n}", timeout=15)
        waits.append(float(start["t"]) - enqueued)
    print(f"pickup: median {statistics.median(waits):.3f} s, max {max(waits):.3f} s")

    assert max(waits) < PROMPT
    lines = [line for line in worker.stderr().splitlines() if "CLIENT UNBLOCK" in line]
    assert len(lines) == 2, lines  # once per server, by the master; children stay quiet
    assert all("rqueue.W120" in line and "late" in line for line in lines)
    for server in (redis_server, other_redis_server):
        assert refused(server, "nounblock", "client|unblock") == 0
