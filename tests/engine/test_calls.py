"""The call builders of ``engine/calls.py`` and the commands that pair them with a parser
(no Redis): each builds ``KEYS`` and ``ARGV`` in its script header's order."""

from __future__ import annotations

import pytest

from django_rqueue.conf import RateLimit
from django_rqueue.engine import calls, commands, replies
from django_rqueue.engine.calls import NewJob, Retention, ScriptCall
from django_rqueue.engine.keys import QueueKeys
from django_rqueue.exceptions import LeaseLost

KEYS = QueueKeys.of("rqueue", "default")
JOB = "default:0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize(
    ("retention", "args"),
    [
        (Retention(None, None), [-1, -1, calls.TRIM_LIMIT]),
        (Retention(3600, 10, limit=5), [3_600_000, 10, 5]),
    ],
)
def test_a_retention_is_sent_in_ms_with_minus_one_for_no_limit(
    retention: Retention, args: list[int]
) -> None:
    assert retention.args() == args


def test_a_reserve_sends_no_cap_as_zero_and_its_rate_limit_only_when_set() -> None:
    plain = calls.reserve(KEYS, lease_ms=30_000, worker_id="w", count=5, request_id="r1")
    assert plain == ScriptCall(
        "reserve",
        [KEYS.base, KEYS.prios, KEYS.reserved, KEYS.stats, KEYS.notify, KEYS.reservation("r1")],
        [30_000, "w", 5, "r1", 0],
    )
    limited = calls.reserve(
        KEYS,
        lease_ms=30_000,
        worker_id="w",
        count=5,
        request_id="r1",
        group_concurrency=2,
        rate_limit=RateLimit(10, 1),
    )
    assert limited.args == [30_000, "w", 5, "r1", 2, 100.0, RateLimit(10, 1).tolerance_ms]


def test_ack_reserve_is_an_ack_followed_by_a_reserve() -> None:
    call = calls.ack_reserve(
        KEYS, JOB, 3, "null", 600, lease_ms=1000, worker_id="w", count=2, request_id="r2"
    )
    assert call.keys[:2] == [KEYS.base, KEYS.job(JOB)]
    assert call.keys[-1] == KEYS.reservation("r2")
    assert call.args == [JOB, 3, "null", 600, 1000, "w", 2, "r2", 0]


def test_a_failure_sends_its_delay_and_retention() -> None:
    call = calls.fail(KEYS, JOB, 4, "{}", -1, Retention(None, 100))
    assert call.script == "fail"
    assert call.args == [JOB, 4, "{}", -1, -1, 100, calls.TRIM_LIMIT]


def test_a_periodic_claim_names_every_key_the_created_job_touches() -> None:
    job = NewJob(JOB, 0, "", "nightly", 0, {"n": "tests.noop"})
    call = calls.schedule_claim(KEYS, job, entry="nightly", tick_ms=1000, next_tick_ms=-1)
    assert call.keys[3] == KEYS.job(JOB)
    assert call.keys[-1] == KEYS.unique("nightly")
    assert call.args == ["nightly", 1000, -1, JOB, 0, "", "nightly", 0, "n", "tests.noop"]


def test_a_command_is_its_builders_call_with_the_replys_parser() -> None:
    command = commands.reserve(KEYS, lease_ms=1, worker_id="w", count=1, request_id="r")
    assert command.call == calls.reserve(KEYS, lease_ms=1, worker_id="w", count=1, request_id="r")
    assert command.parse([0]) == replies.Reserved([], 0)


def test_a_leased_command_reads_its_reply_with_its_job_and_token() -> None:
    ack = commands.ack(KEYS, JOB, 7, "null", 600)
    assert ack.call == calls.ack(KEYS, JOB, 7, "null", 600)
    assert ack.parse([b"stale", b"succeeded", b"7"]) is None  # resent: already applied
    with pytest.raises(LeaseLost, match=JOB):
        ack.parse([b"stale", b"succeeded", b"8"])
    renew = commands.renew(KEYS, JOB, 7, 30_000)
    assert renew.parse([b"ok", 123]) == 123


def test_a_plain_command_names_its_redis_commands() -> None:
    assert commands.read_job(KEYS, JOB).commands == (("HGETALL", KEYS.job(JOB)),)
    pass_on = commands.pass_on(KEYS, JOB)
    assert pass_on.transaction
    assert pass_on.commands == (
        ("RPUSH", KEYS.done(JOB), 1),
        ("EXPIRE", KEYS.done(JOB), commands.DONE_TTL),
    )
