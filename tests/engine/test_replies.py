"""The reply parsers of ``engine/replies.py`` on raw replies as redis-py returns them (no Redis)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from django_rqueue.engine import replies
from django_rqueue.engine.replies import (
    ClaimOutcome,
    DueEntries,
    EnqueueOutcome,
    EnqueueReply,
    FailOutcome,
    FailReply,
    Reply,
    Reserved,
)
from django_rqueue.exceptions import JobStateError, LeaseLost

JOB = "default:0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize(
    ("parse", "reply", "expected"),
    [
        (replies.enqueue_reply, [b"created", JOB.encode(), b"queued", 1_700_000_000_123],
         EnqueueReply(EnqueueOutcome.CREATED, JOB, "queued", 1_700_000_000_123)),
        (replies.enqueue_reply, ["duplicate", "default:holder", "running"],
         EnqueueReply(EnqueueOutcome.DUPLICATE, "default:holder", "running", None)),
        (replies.enqueued, [b"exists", JOB.encode(), b"scheduled"],
         (EnqueueOutcome.EXISTS, JOB, "scheduled")),
        (replies.reserved, [0], Reserved([], 0)),
        (replies.reserved, [250, [JOB.encode(), b"s", b"running", b"token", b"1"]],
         Reserved([(JOB, {b"s": b"running", b"token": b"1"})], 250)),
        (replies.pair, [3, -1], (3, -1)),
        (replies.reclaimed, [1, 2, 0], (1, 2, 0)),
        (replies.trimmed, [100, 1], (100, True)),
        (replies.trimmed, [4, 0], (4, False)),
        (replies.emptied, [5, 1, 0], (5, 1, False)),
        (replies.failed_batch, [1, 2, 3, 4], (1, 2, 3, 4)),
        (replies.flag, 1, True),
        (replies.flag, 0, False),
        (replies.claimed, [b"taken"], ClaimOutcome.TAKEN),
        (replies.claimed, [b"paused"], ClaimOutcome.PAUSED),
        (replies.claimed, [b"created", JOB.encode(), b"queued"],
         (EnqueueOutcome.CREATED, JOB, "queued")),
        (replies.due_entries, [1000, b"2500", b"a", b"900", b"b", b"1000.0"],
         DueEntries(1000, [("a", 900), ("b", 1000)], 2500)),
        (replies.fields, [], {}),
        (replies.fields, [b"s", b"queued"], {b"s": b"queued"}),
    ],
)  # fmt: skip
def test_a_reply_parses_to_its_typed_value(
    parse: Callable[[Reply], Any], reply: Reply, expected: object
) -> None:
    assert parse(reply) == expected


def test_an_unknown_enqueue_outcome_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown outcome"):
        replies.enqueued([b"invented", b"x", b"y"])


def test_a_batch_reply_names_only_the_jobs_not_simply_created() -> None:
    ids = ["q:a", "q:b", "q:c"]
    got = replies.batch_enqueued(ids, [b"queued", 2, b"duplicate", b"q:holder", b"running"])
    assert got == [
        (EnqueueOutcome.CREATED, "q:a", "queued"),
        (EnqueueOutcome.DUPLICATE, "q:holder", "running"),
        (EnqueueOutcome.CREATED, "q:c", "queued"),
    ]


@pytest.mark.parametrize(
    ("outcomes", "acked", "expected"),
    [
        ([EnqueueOutcome.CREATED], 2, 2),
        ([EnqueueOutcome.CREATED, EnqueueOutcome.DUPLICATE], 1, 1),
        ([EnqueueOutcome.CREATED, EnqueueOutcome.EXISTS], 2, 0),
    ],
)
def test_a_resent_write_confirms_no_replica(
    outcomes: list[EnqueueOutcome], acked: int, expected: int
) -> None:
    assert replies.confirmed(outcomes, acked) == expected


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ([b"retrying", 1_700_000_060_000], FailReply(FailOutcome.RETRYING, 1_700_000_060_000)),
        ([b"failed"], FailReply(FailOutcome.FAILED, None)),
        # Our own token, the job already moved on: an earlier try of this report was applied.
        ([b"stale", b"scheduled", b"7"], FailReply(FailOutcome.RETRYING, None)),
        ([b"stale", b"failed", b"7"], FailReply(FailOutcome.FAILED, None)),
    ],
)
def test_a_fail_reply_says_where_the_job_went(reply: Reply, expected: FailReply) -> None:
    got = replies.failed(reply, JOB, 7)
    assert got == expected
    assert got[0] == expected.outcome.value  # still reads as the plain word


@pytest.mark.parametrize(
    "reply",
    [
        [b"stale", b"running", b"8"],  # reclaimed and reserved again
        [b"stale", b"scheduled", b"6"],
        [b"stale", None, None],  # gone
    ],
)
def test_a_fail_reply_under_another_token_is_a_lost_lease(reply: Reply) -> None:
    with pytest.raises(LeaseLost, match="stale fencing token"):
        replies.failed(reply, JOB, 7)


def test_an_ack_is_applied_when_ok_or_already_acked_under_our_token() -> None:
    assert replies.applied([b"ok"], 3)
    assert replies.applied([b"stale", b"succeeded", b"3"], 3)
    assert not replies.applied([b"stale", b"succeeded", b"4"], 3)
    with pytest.raises(LeaseLost, match="job is running, token 4"):
        replies.acked([b"stale", b"running", b"4"], JOB, 3)


def test_a_corrupt_record_is_named_in_the_lost_lease() -> None:
    lost = replies.stale_lease(JOB, [b"stale", replies.CORRUPT_STATE.encode(), b"not a hash"])
    assert "record in Redis is corrupt (not a hash)" in str(lost)


def test_ack_reserve_returns_the_stale_ack_with_the_reservations() -> None:
    stale, got = replies.ack_reserved(
        [[b"stale", b"running", b"9"], 0, [JOB.encode(), b"s", b"running"]], "q:acked", 1
    )
    assert isinstance(stale, LeaseLost)
    assert got == Reserved([(JOB, {b"s": b"running"})], 0)
    assert replies.ack_reserved([[b"ok"], 0], "q:acked", 1) == (None, Reserved([], 0))


def test_renew_returns_the_new_deadline_or_loses_the_lease() -> None:
    assert replies.renewed([b"ok", 1_700_000_030_000], JOB) == 1_700_000_030_000
    with pytest.raises(LeaseLost):
        replies.renewed([b"stale", b"queued", b"0"], JOB)


@pytest.mark.parametrize(
    ("reply", "state"),
    [([b"missing", None], None), ([b"refused", b"running"], "running")],
)
def test_a_refusal_carries_the_state_the_job_is_in(reply: Reply, state: str | None) -> None:
    with pytest.raises(JobStateError) as info:
        replies.requeued(reply, JOB, "job {job_id} is {state}, not failed")
    assert info.value.state == state
    assert str(info.value) == f"job {JOB} is {state or 'missing'}, not failed"


def test_cancel_returns_the_state_the_job_was_in() -> None:
    assert replies.cancelled([b"ok", b"queued"], JOB, "cancel") == "queued"
    assert replies.cancelled([b"requested", b"running"], JOB, "cancel") == "running"
    with pytest.raises(JobStateError, match="cannot delete job .*: it is running"):
        replies.cancelled([b"refused", b"running"], JOB, "delete")


@pytest.mark.parametrize(
    ("read", "reply"),
    [(replies.items, 3), (replies.number, None), (replies.number, [1]), (replies.text, [b"x"])],
)
def test_a_reply_of_the_wrong_shape_is_a_type_error(
    read: Callable[[Reply], object], reply: Reply
) -> None:
    with pytest.raises(TypeError):
        read(reply)


def test_text_reads_bytes_str_nil_and_integers() -> None:
    assert [replies.text(v) for v in (b"caf\xc3\xa9", "x", None, 12)] == ["café", "x", "", "12"]
