"""The child->master pipe: PipeHooks (child side) and Child (the master's record)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from django_rqueue.job import Job, JobStatus
from django_rqueue.master.children import Child, ChildKind, PipeHooks
from django_rqueue.worker.hooks import AttemptOutcome


def _job(n: int) -> Job[Any]:
    return Job(id=f"default:{n:032x}", name="tests.noop", queue="default", status=JobStatus.RUNNING)


@pytest.fixture
def pipe() -> Iterator[tuple[PipeHooks, Child]]:
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    try:
        yield PipeHooks(write_fd), Child(pid=1, fd=read_fd, kind=ChildKind.WORKER)
    finally:
        os.close(read_fd)
        os.close(write_fd)


def test_hold_and_end_wait_for_the_next_start_which_goes_out_at_once(
    pipe: tuple[PipeHooks, Child],
) -> None:
    hooks, child = pipe
    first, second, third = _job(1), _job(2), _job(3)
    hooks.started("default", first)
    assert list(child.read(lease=30)) == []
    assert list(child.running) == [first.id]

    hooks.prefetched("default", [second, third])
    hooks.finished(first, AttemptOutcome.SUCCEEDED)
    assert list(child.read(lease=30)) == []  # buffered: nothing written yet
    assert list(child.running) == [first.id]

    hooks.started("default", second)  # one write: hold, end, start
    assert list(child.read(lease=30)) == ["succeeded"]
    assert list(child.running) == [second.id]
    assert list(child.prefetched) == [third.id]


def test_flush_delivers_a_handed_back_job_and_clears_it(pipe: tuple[PipeHooks, Child]) -> None:
    hooks, child = pipe
    running, held = _job(1), _job(2)
    hooks.started("default", running)
    hooks.prefetched("default", [held])
    hooks.finished(running, AttemptOutcome.FAILED)
    hooks.finished(held, AttemptOutcome.RELEASED)
    hooks.flush()
    assert list(child.read(lease=30)) == ["failed", AttemptOutcome.RELEASED]
    assert (child.running, child.prefetched) == ({}, {})


def test_a_message_split_across_reads_is_applied_once_complete(
    pipe: tuple[PipeHooks, Child],
) -> None:
    hooks, child = pipe
    hooks.started("default", _job(1))
    data = os.read(child.fd, 65536)
    child.buffer = data[:10]  # as if the first read had returned only this much
    os.write(hooks.fd, data[10:])
    assert list(child.read(lease=30)) == []
    [running] = child.running.values()
    assert running.job_id == _job(1).id
    assert running.renew_at - running.started == pytest.approx(10.0)
