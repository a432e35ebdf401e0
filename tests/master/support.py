"""A master with one child record, fed through a real pipe, for the master's in-process tests.

The master's record of a child (:class:`~django_rqueue.master.children.Child`)
is fed through a real pipe by the child's side of the protocol
(:class:`~django_rqueue.master.children.PipeHooks`); the "child" is a plain
``sleep`` process in its own process group, so that whether the master
SIGKILLs it can be observed without forking a worker. The fixture
``supervised`` (``conftest.py``) makes one.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import redis

from django_rqueue.job import Job
from django_rqueue.master.children import Child, ChildKind, PipeHooks
from django_rqueue.master.supervisor import Supervisor
from django_rqueue.worker.settings import WorkerSettings
from tests.support import transitions
from tests.support.inprocess import keys


@dataclass
class FakeChild:
    """A master with one child record, the child's end of its pipe, and a stand-in process."""

    master: Supervisor
    child: Child
    hooks: PipeHooks
    process: subprocess.Popen[bytes]


def fake_child() -> Iterator[FakeChild]:
    """A :class:`FakeChild` whose process is killed and pipe closed at the end."""
    process = subprocess.Popen(["sleep", "60"], start_new_session=True)  # its own group
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    settings = WorkerSettings(("default",))
    master = Supervisor(settings, concurrency=1, with_poller=False, worker_id="w-master")
    child = Child(pid=process.pid, fd=read_fd, kind=ChildKind.WORKER)
    master.children[process.pid] = child
    try:
        yield FakeChild(master, child, PipeHooks(write_fd), process)
    finally:
        process.kill()
        process.wait(timeout=10)
        master.selector.close()
        os.close(read_fd)
        os.close(write_fd)


def reserve(client: redis.Redis) -> Job[Any]:
    """Reserve the next job of ``default`` as worker ``w-master`` (60 s lease)."""
    got = transitions.reserve(client, keys(), lease_ms=60_000, worker_id="w-master")
    assert got is not None
    return Job.from_fields(*got)
