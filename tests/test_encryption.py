"""``RQUEUE["ENCRYPTION_KEYS"]`` (django_rqueue.encryption): job arguments, results and
errors are encrypted at rest, checked by reading the raw Redis contents, with an
in-process worker and a real ``rqueue_work`` process."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import pytest
import redis
from cryptography.fernet import Fernet
from pytest_django.fixtures import Settings

from django_rqueue import JobStatus, get_job
from django_rqueue.encryption import PREFIX
from django_rqueue.engine.keys import QueueKeys
from django_rqueue.serialization import join_payload
from tests.jobs_app.jobs import fail_always, fail_then_succeed, read_ledger, record
from tests.support import transitions
from tests.support.inprocess import poller_thread, run_worker
from tests.support.processes import Processes, command_env
from tests.support.waiting import wait_until

KEYS = QueueKeys.of("rqueue", "default")
KEY_A = Fernet.generate_key().decode()
KEY_B = Fernet.generate_key().decode()
#: Text that must never be found in Redis while keys are set.
SECRET = "card-4111-1111-1111-1111"

pytestmark = pytest.mark.usefixtures("worker_may_close_db_connections")


def use_keys(settings: Settings, *keys: str) -> None:
    rqueue = {k: v for k, v in settings.RQUEUE.items() if k != "ENCRYPTION_KEYS"}
    settings.RQUEUE = {**rqueue, "ENCRYPTION_KEYS": list(keys)} if keys else rqueue


def everything_in(client: redis.Redis) -> bytes:
    """Every key name and value of the database, whatever its type, as one blob."""
    parts: list[Any] = []
    for key in client.scan_iter(count=1000):
        parts.append(key)
        kind = client.type(key)
        if kind == b"hash":
            for field, value in client.hgetall(key).items():
                parts += [field, value]
        elif kind == b"string":
            parts.append(client.get(key) or b"")
        elif kind == b"list":
            parts += client.lrange(key, 0, -1)
        elif kind == b"zset":
            parts += client.zrange(key, 0, -1)
        elif kind == b"set":
            parts += list(client.smembers(key))
        else:
            raise AssertionError(f"unexpected type {kind!r} of {key!r}")
    return b"\n".join(p if isinstance(p, bytes) else str(p).encode() for p in parts)


def payload_of(client: redis.Redis, job_id: str) -> bytes:
    """The job's payload as stored: its parts ``p``, ``p:2``, ... joined."""
    raw: dict[bytes, bytes] = client.hgetall(KEYS.job(job_id))  # type: ignore[assignment]
    return join_payload({k.decode(): v for k, v in raw.items()})


def decrypt_with(key: str, value: object) -> Any:
    assert isinstance(value, bytes) and value.startswith(PREFIX.encode()), value
    return json.loads(Fernet(key).decrypt(value[len(PREFIX) :]))


@pytest.fixture
def encrypted(settings: Settings) -> None:
    use_keys(settings, KEY_A)


@pytest.mark.usefixtures("encrypted")
def test_arguments_results_and_errors_are_not_in_redis_in_plaintext(
    ledger: str, redis_client: redis.Redis
):
    ok = record.delay(ledger, SECRET)  # a long payload: stored in parts
    failing = fail_always.delay(ledger, SECRET)  # RuntimeError(f"boom {SECRET}"), 3 attempts
    assert SECRET.encode() not in everything_in(redis_client)  # queued

    run_worker(with_poller=True, max_jobs=4)  # the poller queues the retries

    assert [e["tag"] for e in read_ledger(ledger)] == [SECRET] * 4  # the jobs got the values
    stored = everything_in(redis_client)
    assert SECRET.encode() not in stored
    assert b"boom" not in stored and b"Traceback" not in stored
    raw = redis_client.hgetall(KEYS.job(ok.id))
    assert decrypt_with(KEY_A, raw[b"result"]) == SECRET
    assert decrypt_with(KEY_A, payload_of(redis_client, ok.id)) == [ledger, SECRET]
    assert raw[b"n"] == record.name.encode() and raw[b"s"] == b"succeeded"  # plain
    done, failed = get_job(ok.id), get_job(failing.id)
    assert done is not None and done.result == SECRET and done.args == [ledger, SECRET]
    assert failed is not None and failed.error is not None and not failed.problems
    assert failed.error["message"] == f"boom {SECRET}"
    assert [e["message"] for e in failed.errors] == [f"boom {SECRET}"] * 3


def test_a_real_worker_runs_an_encrypted_job_and_its_result_reads_back(
    settings: Settings, ledger: str, redis_client: redis.Redis, tmp_path: Path
):
    use_keys(settings, KEY_A)
    processes = Processes(tmp_path / "commands")
    try:
        worker = processes.start(
            "rqueue_work",
            "--queues",
            "default",
            env=command_env(extra={"RQUEUE_TEST_ENCRYPTION_KEYS": json.dumps([KEY_A])}),
        )
        enqueued = record.delay(ledger, SECRET)

        def done() -> bool:
            found = get_job(enqueued.id)
            return found is not None and found.status is JobStatus.SUCCEEDED

        wait_until(done, timeout=20, message="the worker did not run the job")
        worker.signal(signal.SIGTERM)
        assert worker.wait(10) == 0, worker.report()
    finally:
        processes.kill_all()
        print(processes.reports())

    read = get_job(enqueued.id)
    assert read is not None and read.result == SECRET
    assert SECRET.encode() not in everything_in(redis_client)
    assert SECRET not in worker.stderr()


def test_rotation_reads_with_every_key_and_writes_with_the_first(
    settings: Settings, ledger: str, redis_client: redis.Redis
):
    use_keys(settings, KEY_A)
    old = record.delay(ledger, "old")
    use_keys(settings, KEY_B, KEY_A)
    new = record.delay(ledger, "new")

    run_worker(burst=True)

    for enqueued, tag in ((old, "old"), (new, "new")):
        read = get_job(enqueued.id)
        assert read is not None and read.result == tag and not read.problems
        raw = redis_client.hgetall(KEYS.job(enqueued.id))
        assert decrypt_with(KEY_B, raw[b"result"]) == tag  # written after the rotation
    assert decrypt_with(KEY_A, payload_of(redis_client, old.id)) == [ledger, "old"]
    assert decrypt_with(KEY_B, payload_of(redis_client, new.id)) == [ledger, "new"]


def test_a_job_encrypted_with_a_key_no_longer_configured_fails_saying_so(
    settings: Settings, ledger: str
):
    use_keys(settings, KEY_A)
    lost = record.delay(ledger, SECRET)
    use_keys(settings, KEY_B)

    read = get_job(lost.id)
    assert read is not None
    assert read.problems == [
        "its arguments are encrypted with a key that is not in RQUEUE['ENCRYPTION_KEYS'] "
        "(add the key that encrypted them back to the list, after the current one)"
    ]
    run_worker(burst=True)  # the worker goes on: the job fails, nothing crashes

    failed = get_job(lost.id)
    assert failed is not None and failed.status is JobStatus.FAILED and failed.error is not None
    message = failed.error["message"]
    assert "encrypted with a key that is not in RQUEUE['ENCRYPTION_KEYS']" in message, message
    assert read_ledger(ledger) == []  # never run with made-up arguments
    use_keys(settings, KEY_B, KEY_A)  # the key is back: the job reads and runs again
    again = get_job(lost.id)
    assert again is not None and again.args == [ledger, SECRET]
    again.retry()
    run_worker(burst=True)
    assert [e["tag"] for e in read_ledger(ledger)] == [SECRET]


def test_an_encrypted_record_read_without_keys_says_the_setting_is_missing(
    settings: Settings, ledger: str
):
    use_keys(settings, KEY_A)
    enqueued = record.delay(ledger, SECRET)
    use_keys(settings)

    read = get_job(enqueued.id)

    assert read is not None and read.args == []
    assert read.problems == [
        "its arguments are encrypted but RQUEUE['ENCRYPTION_KEYS'] is not set "
        "(set it to the keys that encrypted them)"
    ]


def test_records_written_before_the_keys_were_set_still_read_and_run(
    settings: Settings, ledger: str, redis_client: redis.Redis
):
    plain = record.delay(ledger, "plain")
    use_keys(settings, KEY_A)

    read = get_job(plain.id)
    assert read is not None and read.args == [ledger, "plain"] and not read.problems
    run_worker(burst=True)

    done = get_job(plain.id)
    assert done is not None and done.result == "plain"
    assert decrypt_with(KEY_A, redis_client.hget(KEYS.job(plain.id), "result") or b"") == "plain"


def test_an_error_record_no_key_decrypts_reads_as_unreadable_and_the_job_still_runs(
    settings: Settings, ledger: str
):
    use_keys(settings, KEY_A)
    failing = fail_then_succeed.using(max_attempts=1).delay(ledger, SECRET, 1)
    use_keys(settings, KEY_B, KEY_A)
    run_worker(burst=True)  # fails once: its error is encrypted with B
    use_keys(settings, KEY_A)  # B is gone; the arguments are still under A
    get_job(failing.id).retry()  # type: ignore[union-attr]

    read = get_job(failing.id)
    assert read is not None and read.error is not None and not read.problems
    assert read.error["message"].startswith("(unreadable: its errors are encrypted with a key")
    assert SECRET not in json.dumps(read.errors)
    run_worker(burst=True)

    done = get_job(failing.id)
    assert done is not None and done.status is JobStatus.SUCCEEDED and done.result == 2


@pytest.mark.usefixtures("encrypted")
def test_a_lost_lease_s_plain_error_sits_beside_encrypted_data(
    ledger: str, redis_client: redis.Redis
):
    enqueued = record.using(max_attempts=2).delay(ledger, SECRET)
    reserved = transitions.reserve(redis_client, KEYS, lease_ms=1, worker_id="lost-worker")
    assert reserved is not None and reserved[0] == enqueued.id  # its worker never reports

    with poller_thread():  # reclaim.lua records the lease's error (plain) and requeues it

        def requeued() -> bool:
            found = get_job(enqueued.id)
            return found is not None and found.status is JobStatus.QUEUED

        wait_until(requeued, timeout=10, message="the lost job was not requeued")
    run_worker(burst=True)

    done = get_job(enqueued.id)
    assert done is not None and not done.problems
    assert done.status is JobStatus.SUCCEEDED and done.result == SECRET
    assert [(e["message"], e.get("worker")) for e in done.errors] == [
        ("lease expired", "lost-worker")
    ]
    assert SECRET.encode() not in everything_in(redis_client)


@pytest.mark.usefixtures("encrypted")
def test_every_enqueue_path_writes_encrypted_arguments(ledger: str, redis_client: redis.Redis):
    many = record.delay_many([((ledger, f"{SECRET}-{n}"), {}) for n in range(3)])
    from_async = asyncio.run(record.adelay(ledger, f"{SECRET}-async"))
    scheduled = record.using(delay=3600).delay(ledger, f"{SECRET}-later")

    assert SECRET.encode() not in everything_in(redis_client)
    for enqueued in (*many, from_async, scheduled):
        read = get_job(enqueued.id)
        assert read is not None and not read.problems and read.args[1].startswith(SECRET)
