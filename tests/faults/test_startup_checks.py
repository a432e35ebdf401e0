"""A worker refuses to start on a Redis that would lose jobs or that it may not use.

Real ``redis-server`` processes with the bad setting, a real ``rqueue_work``
and a real ``manage.py check --deploy`` (started together to save time):

- ``maxmemory-policy allkeys-lru``: the worker exits non-zero naming
  ``maxmemory-policy`` and ``noeviction``; the deploy check shows rqueue.E010.
- persistence off: only a warning (rqueue.W010); the worker starts.
- a wrong password (``WRONGPASS``): the worker fails fast with rqueue.E011
  and Redis's reason; so does the deploy check.
- a user without ``+@scripting`` (``NOPERM``): rqueue.E012 with the grant to add.
- a TLS certificate the client cannot verify: rqueue.E014 with the URL option to
  add, at once (a configuration error, not an outage to wait out).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.support.redis_server import RedisServer, password_protected
from tests.support.tls import TlsRedis

from .harness import STARTUP, Faults


@pytest.fixture
def lru_redis() -> Iterator[RedisServer]:
    with RedisServer(["--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru"]) as server:
        yield server


@pytest.fixture
def password_redis() -> Iterator[RedisServer]:
    """A Redis that wants the password ``s3cret``."""
    with password_protected("s3cret") as server:
        yield server


@pytest.fixture
def aof_redis() -> Iterator[RedisServer]:
    with RedisServer(["--appendonly", "yes"]) as server:
        yield server


def test_eviction_policy_refuses_to_start(faults: Faults, lru_redis: RedisServer) -> None:
    started = time.monotonic()
    worker = faults.worker("--queues", "default", "--concurrency", "1", redis_url=lru_redis.url)
    check = faults.command("check", "--deploy", redis_url=lru_redis.url)

    assert worker.wait(timeout=STARTUP) != 0
    print(f"worker refused to start in {time.monotonic() - started:.1f} s")
    stderr = worker.stderr()
    assert "maxmemory-policy" in stderr and "noeviction" in stderr, stderr
    assert "rqueue.E010" in stderr and "allkeys-lru" in stderr
    assert "serving" not in stderr, "a child was started anyway"
    assert lru_redis.client().keys("rqueue:*") == [], "the worker wrote to Redis"

    assert check.wait(timeout=STARTUP) != 0
    output = check.stdout() + check.stderr()
    assert "rqueue.E010" in output and "noeviction" in output, output


def test_persistence_off_is_a_warning(
    faults: Faults, redis_server: RedisServer, aof_redis: RedisServer
) -> None:
    worker = faults.worker("--queues", "default", "--concurrency", "1")  # the session Redis
    check_off = faults.command("check", "--deploy")
    check_aof = faults.command("check", "--deploy", redis_url=aof_redis.url)

    assert check_off.wait(timeout=STARTUP) == 0  # warnings only
    output = check_off.stdout() + check_off.stderr()
    assert "rqueue.W010" in output and "persistence is off" in output, output
    assert "rqueue.E0" not in output

    assert check_aof.wait(timeout=STARTUP) == 0
    output = check_aof.stdout() + check_aof.stderr()
    assert "rqueue.W010" not in output and "rqueue.E0" not in output, output

    faults.wait_ready(worker)  # it starts, and says why it is worried
    assert "rqueue.W010" in worker.stderr()


def test_wrong_password_fails_fast_and_clearly(faults: Faults, password_redis: RedisServer) -> None:
    url = f"redis://:wrong@127.0.0.1:{password_redis.port}/0"
    started = time.monotonic()
    worker = faults.worker("--queues", "default", "--concurrency", "1", redis_url=url)
    check = faults.command("check", "--deploy", redis_url=url)

    assert worker.wait(timeout=STARTUP) != 0
    print(f"worker gave up on WRONGPASS in {time.monotonic() - started:.1f} s")
    stderr = worker.stderr()
    # redis-py strips the WRONGPASS code; Redis's own text follows it.
    assert "rqueue.E011" in stderr and "rejected the credentials" in stderr, stderr
    assert "invalid username-password pair" in stderr
    assert "redis://user:password@" in stderr  # the hint says what to fix
    assert "serving" not in stderr
    assert "Traceback" not in stderr, "a clear message, not a crash"

    assert check.wait(timeout=STARTUP) != 0
    output = check.stdout() + check.stderr()
    assert "rqueue.E011" in output, output


def test_user_without_scripting_rights_fails_fast_and_clearly(faults: Faults) -> None:
    with RedisServer() as server:
        server.client().acl_setuser(
            "app",
            enabled=True,
            passwords=["+s3cret"],
            keys=["*"],
            commands=["+@all", "-@scripting"],
        )
        url = f"redis://app:s3cret@127.0.0.1:{server.port}/0"
        worker = faults.worker("--queues", "default", "--concurrency", "1", redis_url=url)
        assert worker.wait(timeout=STARTUP) != 0
        stderr = worker.stderr()
        assert "rqueue.E012" in stderr and "Lua scripts" in stderr, stderr
        assert "NOPERM" in stderr or "no permissions" in stderr
        assert "+@scripting" in stderr  # the hint says what to grant
        assert "serving" not in stderr and "Traceback" not in stderr


def test_a_refused_tls_certificate_fails_fast_and_clearly(faults: Faults) -> None:
    with TlsRedis() as tls:
        untrusted = tls.url(trusted=False)  # the server's CA is not given: verification fails
        started = time.monotonic()
        worker = faults.worker("--queues", "default", "--concurrency", "1", redis_url=untrusted)
        check = faults.command("rqueue_info", "--check", redis_url=untrusted)

        assert worker.wait(timeout=STARTUP) != 0  # not waiting for it as for an outage
        print(f"worker gave up on the certificate in {time.monotonic() - started:.1f} s")
        stderr = worker.stderr()
        assert "rqueue.E014" in stderr and "TLS certificate was refused" in stderr, stderr
        assert "ssl_ca_certs=" in stderr  # the hint says what to fix
        assert "serving" not in stderr and "Traceback" not in stderr

        assert check.wait(timeout=STARTUP) == 2  # CRITICAL
        assert "CRITICAL" in check.stdout() and "rqueue.E014" in check.stdout(), check.stdout()

        trusted = faults.worker(
            "--queues", "default", "--concurrency", "1", redis_url=tls.url(trusted=True)
        )
        faults.wait_ready(trusted)
        assert "rqueue.E01" not in trusted.stderr()
