"""enqueue.lua and promote.lua: immediate and delayed jobs, on the Redis clock."""

from __future__ import annotations

import pytest
import redis

from django_rqueue.engine import calls
from django_rqueue.engine.fields import JobFields
from django_rqueue.engine.keys import QueueKeys
from django_rqueue.engine.replies import EnqueueOutcome
from django_rqueue.serialization import join_payload
from tests.support import transitions
from tests.support.engine import Engine, _s
from tests.support.redis_sentinel import SentinelSet
from tests.support.waiting import wait_until


def test_an_immediate_job_is_queued_with_its_record(engine: Engine):
    before = engine.now_ms()
    outcome, job_id, state = engine.enqueue(priority=7, group="user:9", max_attempts=4)
    after = engine.now_ms()
    assert (outcome, state) == ("created", "queued")
    job = engine.job(job_id)
    assert job["s"] == "queued"
    assert (job["prio"], job["group"], job["attempts"], job["token"]) == ("7", "user:9", "0", "0")
    assert job["max"] == "4"
    assert job["p"] == '{"a":[],"k":{}}'
    assert before <= int(job["at"]) <= int(job["due"]) <= after
    assert engine.lrange(engine.keys.group(7, "user:9")) == [job_id]
    assert engine.lrange(engine.keys.ring(7)) == ["user:9"]
    assert engine.zset(engine.keys.prios) == {"7": 7.0}
    assert engine.stats() == {"queued": 1, "enqueued": 1}
    assert engine.client.llen(engine.keys.notify) == 1  # wakes an idle worker
    engine.check_invariants()


@pytest.mark.parametrize(
    ("size", "parts"),
    [(64, 1), (65, 2), (126, 2), (127, 3), (200, 4), (1024, 17), (1071, 17), (1072, 1), (5000, 1)],
)
def test_a_payload_is_stored_in_63_byte_parts_up_to_1071_bytes(
    engine: Engine, size: int, parts: int
):
    payload = ("0123456789abcdef" * 400)[:size]
    job_id = engine.add(payload=payload)
    job = engine.job(job_id)
    names = ["p"] + [f"p:{n}" for n in range(2, parts + 1)]
    assert [k for k in job if k == "p" or k.startswith("p:")] == names
    assert all(len(job[name]) <= 63 for name in names) or parts == 1
    assert "".join(job[name] for name in names) == payload
    compact = size <= 1071
    encoding = engine.client.object("encoding", engine.keys.job(job_id))
    assert (encoding == b"listpack") == compact


def test_a_payload_split_inside_a_utf8_character_is_joined_byte_exact(engine: Engine):
    payload = '{"a":["' + "é" * 40 + '"],"k":{}}'  # 2-byte characters; a part ends mid-character
    job_id = engine.add(payload=payload)
    raw = engine.client.hgetall(engine.keys.job(job_id))
    assert raw[b"p"][-1:] != b'"'  # really cut inside the string
    assert join_payload({_s(k): v for k, v in raw.items()}).decode() == payload


def test_fields_at_their_default_are_left_out_of_the_job_hash(engine: Engine):
    plain = engine.add()
    raw = engine.job_like(engine.keys.job(plain))
    assert not {"prio", "group", "attempts", "token"} & set(raw)
    assert raw["s"] == "queued"
    other = engine.add(priority=-2, group="g")
    assert (engine.job_like(engine.keys.job(other))["prio"], engine.job(other)["group"]) == (
        "-2",
        "g",
    )
    # Every transition reads the defaults back: reserve counts from 0, release re-queues it.
    job_id, fields = transitions.reserve_many(
        engine.client, engine.keys, lease_ms=5000, worker_id="w", count=1
    ).jobs[0]
    assert (job_id, fields[b"token"], fields[b"attempts"]) == (plain, b"1", b"1")
    transitions.release(engine.client, engine.keys, plain, 1)
    assert engine.lrange(engine.keys.group(0, "")) == [plain]
    engine.check_invariants()


def test_enqueueing_the_same_id_twice_is_a_no_op(engine: Engine):
    job_id = engine.add(group="g")
    before = engine.snapshot()
    assert engine.enqueue(job_id=job_id, group="other", priority=50) == ("exists", job_id, "queued")
    assert engine.snapshot() == before


def test_a_delayed_job_waits_in_the_delayed_set_and_cannot_be_reserved(engine: Engine):
    before = engine.now_ms()
    outcome, job_id, state = engine.enqueue(delay_ms=60_000)
    assert (outcome, state) == ("created", "scheduled")
    run_at = engine.zset(engine.keys.delayed)[job_id]
    assert before + 60_000 <= run_at <= engine.now_ms() + 60_000
    assert int(engine.job(job_id)["due"]) == run_at
    assert engine.client.llen(engine.keys.wake) == 1  # wakes a sleeping poller
    assert engine.reserve() is None
    promoted, next_due = engine.promote()
    assert promoted == 0
    assert 55_000 < next_due <= 60_000
    assert engine.state(job_id) == "scheduled"
    engine.check_invariants()


def test_run_at_wins_over_delay(engine: Engine):
    run_at = engine.now_ms() + 90_000
    _, job_id, state = engine.enqueue(delay_ms=1, run_at_ms=run_at)
    assert state == "scheduled"
    assert engine.zset(engine.keys.delayed)[job_id] == run_at


def test_a_run_at_in_the_past_is_queued_at_once(engine: Engine):
    _, job_id, state = engine.enqueue(run_at_ms=engine.now_ms() - 10_000)
    assert state == "queued"
    assert engine.zset(engine.keys.delayed) == {}
    assert engine.reserve_id() == job_id


def test_delayed_jobs_become_reservable_at_their_run_at_and_in_due_order(engine: Engine):
    now = engine.now_ms()
    # Enqueued out of order; due in 300, 100 and 200 ms (Redis clock).
    due = {engine.add(run_at_ms=now + offset): now + offset for offset in (300, 100, 200)}
    assert engine.reserve() is None
    reserved: list[str] = []

    def step() -> bool:
        engine.promote()
        for job_id in engine.drain():
            # Promotion never happens before run_at, on the server's clock.
            assert int(engine.job(job_id)["started_at"]) >= due[job_id]
            reserved.append(job_id)
        return len(reserved) == 3

    wait_until(step, timeout=5, message="delayed jobs promoted")
    assert reserved == sorted(due, key=due.__getitem__)
    engine.check_invariants()


def test_promote_reports_the_wait_until_the_next_due_job(engine: Engine):
    assert engine.promote() == (0, -1)
    engine.add(delay_ms=30_000)
    engine.add(delay_ms=10_000)
    promoted, next_due = engine.promote()
    assert promoted == 0
    assert 5_000 < next_due <= 10_000


def test_promote_moves_at_most_a_batch_and_says_more_are_due(engine: Engine):
    ids = []
    for _ in range(5):
        _, job_id, state = engine.enqueue(delay_ms=1)
        assert state == "scheduled"
        ids.append(job_id)
    due = engine.zset(engine.keys.delayed)
    last_due = max(due.values())
    wait_until(lambda: engine.now_ms() >= last_due, message="all five due")
    assert engine.promote(limit=2) == (2, 0)
    assert engine.promote(limit=2) == (2, 0)
    assert engine.promote(limit=2) == (1, -1)
    assert engine.drain() == sorted(ids, key=lambda i: (due[i], i))  # ties: by id
    engine.check_invariants()


def test_promoted_jobs_keep_their_priority_and_group(engine: Engine):
    plain = engine.add(priority=0, group="a")
    late = engine.add(priority=9, group="b", delay_ms=50)
    wait_until(lambda: engine.promote()[0] == 1, message="promoted")
    assert engine.drain() == [late, plain]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("priority", 101, "bad priority"),
        ("priority", -101, "bad priority"),
        ("delay_ms", -1, "bad delay"),
        ("unique_ttl", -1, "bad delay/run_at/unique_ttl"),
    ],
)
def test_bad_arguments_write_nothing(engine: Engine, field: str, value: int, message: str):
    with pytest.raises(redis.ResponseError, match=message):
        engine.enqueue(**{field: value})  # type: ignore[arg-type]
    assert engine.client.dbsize() == 0


def plain_call(keys: QueueKeys, job_id: str, unique_key: str = "") -> calls.ScriptCall:
    """The ``enqueue.lua`` call of a job with every option at its default."""
    fields = {"n": "tests.noop", "p": '{"a":[],"k":{}}'}
    job = calls.NewJob(job_id, 0, "", unique_key, 0, fields)
    return calls.enqueue(keys, job, delay_ms=0, run_at_ms=-1)


def test_a_unique_key_sent_without_its_key_name_writes_nothing(engine: Engine):
    call = plain_call(engine.keys, "default:unique1", unique_key="report:1")
    truncated = call._replace(keys=call.keys[:2])
    with pytest.raises(redis.ResponseError, match="unique key without its KEYS"):
        transitions.enqueue(engine.client, truncated)
    assert engine.client.dbsize() == 0


def test_only_the_base_the_job_and_a_unique_key_are_sent_as_keys(engine: Engine):
    job = engine.keys.job("default:plain1")
    assert plain_call(engine.keys, "default:plain1").keys == [engine.keys.base, job]
    assert plain_call(engine.keys, "default:plain1", unique_key="k").keys == [
        engine.keys.base,
        job,
        engine.keys.unique("k"),
    ]


def test_a_shared_call_writes_the_shared_fields_and_the_jobs_own_win_over_them(engine: Engine):
    """``EnqueueShared``: what a plan's jobs share is built once; a job's own field pairs
    come after them, so a name given in both stores the job's value."""
    shared = calls.EnqueueShared(engine.keys, (5, "g1", 0, -1), 0, ("n", "tests.noop", "max", 4))
    for job_id, own in (("default:shared1", ()), ("default:shared2", ("max", 9))):
        call = shared.call(job_id, "", "p", "[1]", *own)
        assert transitions.enqueue(engine.client, call)[0] is EnqueueOutcome.CREATED
    first, second = (engine.job(f"default:shared{n}") for n in (1, 2))
    assert (first["n"], first["max"], first["prio"], first["group"]) == (
        "tests.noop",
        "4",
        "5",
        "g1",
    )
    assert (second["max"], second["p"]) == ("9", "[1]")


def test_a_write_and_its_wait_report_the_replicas_and_a_resend_counts_as_unconfirmed():
    """``enqueue_and_wait`` / ``enqueue_batch_and_wait``: WAIT counts the replicas that have
    the connection's writes; a resent call that finds its jobs (``exists``) wrote nothing on
    this connection, so it reports 0."""
    wait = transitions.ReplicaWait(replicas=1, timeout_ms=2000)
    keys = QueueKeys.of("rqueue", "default")
    call = plain_call(keys, "default:durable1")
    items = [transitions.BatchItem(f"default:durable-b{i}", "", "{}") for i in range(3)]
    shared = calls.EnqueueShared(keys, (0, "", 0, -1), 0, ("n", "tests.noop")).batch()
    with SentinelSet(sentinels=0).start() as pair, pair.master.client() as client:
        (created, acked) = transitions.enqueue_and_wait(client, call, wait)
        assert (created[:3], acked) == ((EnqueueOutcome.CREATED, "default:durable1", "queued"), 1)
        stored = client.hget(keys.job("default:durable1"), JobFields.ENQUEUED_AT)
        assert stored is not None and created.enqueued_ms == int(stored)
        resent = transitions.enqueue_and_wait(client, call, wait)
        assert resent == ((EnqueueOutcome.EXISTS, "default:durable1", "queued", None), 0)
        replies, acked = transitions.enqueue_batch_and_wait(client, shared, items, wait)
        assert ([r[0] for r in replies], acked) == ([EnqueueOutcome.CREATED] * 3, 1)
        replies, acked = transitions.enqueue_batch_and_wait(client, shared, items, wait)
        assert ([r[0] for r in replies], acked) == ([EnqueueOutcome.EXISTS] * 3, 0)
