"""The flows of ``engine/flows.py`` driven by hand, step by step (no Redis)."""

from __future__ import annotations

from typing import Any

import pytest

from django_rqueue.engine import commands, flows
from django_rqueue.engine.keys import QueueKeys
from django_rqueue.engine.replies import Fields

KEYS = QueueKeys.of("rqueue", "default")
JOB = "default:0123456789abcdef0123456789abcdef"
RUNNING: Fields = {b"s": b"running"}
DONE: Fields = {b"s": b"succeeded"}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def finished(fields: Fields) -> bool:
    return fields.get(b"s") == b"succeeded"


def script(step: commands.Step[Any]) -> str:
    assert isinstance(step, commands.Command)
    return step.call.script


def plain(step: commands.Step[Any]) -> commands.Plain[Any]:
    assert isinstance(step, commands.Plain)
    return step


def steps(flow: flows.Flow[Any], results: list[Any]) -> tuple[list[Any], Any]:
    """Run ``flow``, answering its steps with ``results`` in order: (the steps, its return)."""
    seen: list[Any] = []
    answer: Any = None
    try:
        while True:
            seen.append(flow.send(answer))
            answer = results.pop(0)
    except StopIteration as done:
        return seen, done.value


def test_a_finished_job_is_read_once_and_nothing_else() -> None:
    flow = flows.wait_for_job(KEYS, JOB, deadline=105.0, settled=finished, now=Clock())
    seen, settled = steps(flow, [DONE])
    assert [script(step) for step in seen] == ["mark_awaited"]
    assert settled is True


def test_a_waiter_blocks_in_slices_and_passes_the_wake_up_on() -> None:
    clock = Clock()
    flow = flows.wait_for_job(KEYS, JOB, deadline=112.0, settled=finished, now=clock)
    assert script(flow.send(None)) == "mark_awaited"
    block = plain(flow.send(RUNNING))
    assert block.commands == (("BLPOP", KEYS.done(JOB), flows.BLOCK_SLICE),)
    clock.now = 111.5
    assert script(flow.send(False)) == "mark_awaited"  # no token: read again
    assert plain(flow.send(RUNNING)).commands == (("BLPOP", KEYS.done(JOB), 0.5),)
    assert script(flow.send(True)) == "mark_awaited"  # woken by the terminal transition
    pass_on = plain(flow.send(DONE))
    assert pass_on.transaction and [c[0] for c in pass_on.commands] == ["RPUSH", "EXPIRE"]
    with pytest.raises(StopIteration) as done:
        flow.send(None)
    assert done.value.value is True


def test_the_deadline_ends_the_wait_unsettled() -> None:
    clock = Clock()
    flow = flows.wait_for_job(KEYS, JOB, deadline=100.0, settled=finished, now=clock)
    seen, settled = steps(flow, [RUNNING])
    assert len(seen) == 1 and settled is False


@pytest.mark.parametrize("timeout", [-1, float("nan"), True, "5"])
def test_a_timeout_must_be_a_number_of_seconds(timeout: Any) -> None:
    with pytest.raises(ValueError, match="timeout must be a number of seconds"):
        flows.deadline_of(timeout)


@pytest.mark.parametrize(("remaining", "expected"), [(0.0, 0.001), (2.5, 2.5), (60, 5.0)])
def test_a_block_never_rounds_to_forever_nor_outlasts_a_slice(
    remaining: float, expected: float
) -> None:
    assert flows.block_seconds(remaining) == expected
