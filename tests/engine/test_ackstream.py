"""AckStream: acks written without waiting, replies read later, unknown ones resendable."""

from __future__ import annotations

import pytest
import redis

from django_rqueue import LeaseLost
from django_rqueue.engine import transitions
from django_rqueue.engine.connection import get_client
from django_rqueue.engine.keys import QueueKeys
from django_rqueue.engine.pipelining import AckStream, PendingAck
from django_rqueue.engine.scripts import load
from tests.support.jobs_in_state import enqueue_raw

KEYS = QueueKeys.of("rqueue", "default")


def _running(client: redis.Redis, n: int) -> list[tuple[str, int]]:
    """Enqueue and reserve ``n`` jobs; return their ``(id, token)``."""
    for _ in range(n):
        enqueue_raw("tests.noop", '{"a":[],"k":{}}')
    got = transitions.reserve_many(client, KEYS, lease_ms=60_000, worker_id="w", count=n)
    return [(job_id, int(fields[b"token"])) for job_id, fields in got]


def _ack(job_id: str, token: int) -> PendingAck:
    return PendingAck("default", KEYS, job_id, token, '"done"', 600)


def _state(client: redis.Redis, job_id: str) -> bytes | None:
    return client.hget(KEYS.job(job_id), "s")  # type: ignore[return-value]


def test_acks_apply_before_their_replies_are_read(rqueue_redis: redis.Redis) -> None:
    load("ack").ensure_loaded(rqueue_redis)
    jobs = _running(rqueue_redis, 3)
    stream = AckStream(rqueue_redis)
    for job_id, token in jobs:
        stream.send(_ack(job_id, token))
    # Nothing read yet, yet Redis has applied every ack.
    assert len(stream.pending) == 3
    assert [_state(rqueue_redis, job_id) for job_id, _ in jobs] == [b"succeeded"] * 3
    verdicts = stream.collect()
    assert [(ack.job_id, verdict) for ack, verdict in verdicts] == [(j, True) for j, _ in jobs]
    assert stream.pending == []
    stream.close()


def test_a_stale_token_is_reported_as_lease_lost_and_changes_nothing(
    rqueue_redis: redis.Redis,
) -> None:
    load("ack").ensure_loaded(rqueue_redis)
    (good, token), (other, other_token) = _running(rqueue_redis, 2)
    stream = AckStream(rqueue_redis)
    stream.send(_ack(other, other_token + 5))
    stream.send(_ack(good, token))
    (_, first), (_, second) = stream.collect()
    assert isinstance(first, LeaseLost) and "stale fencing token" in str(first)
    assert second is True
    assert _state(rqueue_redis, other) == b"running"


def test_after_script_flush_the_verdict_is_unknown_and_a_resend_applies(
    rqueue_redis: redis.Redis,
) -> None:
    ((job_id, token),) = _running(rqueue_redis, 1)
    rqueue_redis.script_flush()
    stream = AckStream(rqueue_redis)
    stream.send(_ack(job_id, token))
    ((ack, verdict),) = stream.collect()
    assert verdict is None and _state(rqueue_redis, job_id) == b"running"
    transitions.ack(rqueue_redis, ack.keys, ack.job_id, ack.token, ack.result, ack.result_ttl)
    assert _state(rqueue_redis, job_id) == b"succeeded"


def test_a_broken_connection_leaves_the_verdicts_unknown_and_acks_are_idempotent(
    rqueue_redis: redis.Redis,
) -> None:
    load("ack").ensure_loaded(rqueue_redis)
    jobs = _running(rqueue_redis, 2)
    stream = AckStream(rqueue_redis)
    stream.send(_ack(*jobs[0]))
    rqueue_redis.client_kill_filter(skipme=True, _type="normal")  # every other client
    stream.send(_ack(*jobs[1]))
    verdicts = stream.collect()
    # The first reply may have arrived before the kill; the second cannot be known.
    assert verdicts[0][1] in (True, None) and verdicts[1][1] is None
    for ack, _ in verdicts:  # the first was applied: resending it reads as applied again
        transitions.ack(rqueue_redis, ack.keys, ack.job_id, ack.token, ack.result, ack.result_ttl)
    assert [_state(rqueue_redis, j) for j, _ in jobs] == [b"succeeded", b"succeeded"]


def test_a_due_health_check_does_not_steal_a_pending_reply(rqueue_redis: redis.Redis) -> None:
    load("ack").ensure_loaded(rqueue_redis)
    client = get_client("default")  # django-rqueue's options: health checks every 15 s
    jobs = _running(rqueue_redis, 2)
    stream = AckStream(client)
    stream.send(_ack(*jobs[0]))
    stream.wire.connection.next_health_check = 0  # as after a job that ran past the interval
    stream.send(_ack(*jobs[1]))
    assert [verdict for _, verdict in stream.collect()] == [True, True]
    stream.close()


@pytest.mark.parametrize("n", [0, 1])
def test_collect_with_nothing_owed_is_empty(rqueue_redis: redis.Redis, n: int) -> None:
    stream = AckStream(rqueue_redis)
    if n:
        load("ack").ensure_loaded(rqueue_redis)
        stream.send(_ack(*_running(rqueue_redis, 1)[0]))
        stream.collect()
    assert stream.collect() == []
    stream.close()
    stream.close()  # twice is harmless
