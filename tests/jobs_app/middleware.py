"""Job middleware used by tests/test_middleware.py (``RQUEUE["MIDDLEWARE"]``).

Each class notes what it sees in :data:`EVENTS` (in-process) and, when the environment
variable ``RQUEUE_TEST_MIDDLEWARE_LEDGER`` names a file, appends it there as a ledger
line (a worker subprocess), so that the order of enqueue hooks and the nesting of the
attempt wraps can be checked from outside the process that ran them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from django_rqueue.context import JobContext
from django_rqueue.middleware import EnqueueCall, JobMiddleware
from tests.jobs_app.jobs import write_ledger

#: What the middleware saw, in order: ``(event, middleware tag, detail)``.
EVENTS: list[tuple[str, str, Any]] = []
#: The tags of the attempt wraps open right now (the jobs below read it while they run).
OPEN: list[str] = []


def _note(event: str, tag: str, detail: Any = None) -> None:
    EVENTS.append((event, tag, detail))
    ledger = os.environ.get("RQUEUE_TEST_MIDDLEWARE_LEDGER")
    if ledger:
        write_ledger(ledger, tag, event, detail=detail)


class _Tagging(JobMiddleware):
    tag = ""

    def enqueue(self, call: EnqueueCall) -> None:
        _note("enqueue", self.tag, call.entry)
        call.headers["order"] = call.headers.get("order", "") + self.tag
        call.headers[f"seen-{self.tag}"] = f"{call.name}@{call.queue}"

    def attempt(self, context: JobContext) -> AbstractContextManager[object]:
        return self._around(context)

    @contextmanager
    def _around(self, context: JobContext) -> Iterator[None]:
        _note("enter", self.tag, context.attempt)
        OPEN.append(self.tag)
        try:
            yield
        except BaseException as exc:
            _note("exit", self.tag, f"{type(exc).__name__}: {exc}")
            raise
        else:
            _note("exit", self.tag, None)
        finally:
            OPEN.remove(self.tag)


class First(_Tagging):
    """Adds ``order`` += ``"1"`` and ``seen-1``; wraps attempts (tag ``"1"``)."""

    tag = "1"


class Second(_Tagging):
    """Adds ``order`` += ``"2"`` and ``seen-2``; wraps attempts (tag ``"2"``)."""

    tag = "2"


class JobIdHeader(JobMiddleware):
    """Puts each job's own id in the header ``id`` (headers that differ per job)."""

    def enqueue(self, call: EnqueueCall) -> None:
        call.headers["id"] = call.job_id


class BadValue(JobMiddleware):
    """Adds a header whose value is not text."""

    def enqueue(self, call: EnqueueCall) -> None:
        call.headers["n"] = 1  # type: ignore[assignment]


class TooLarge(JobMiddleware):
    """Adds headers larger than the bound."""

    def enqueue(self, call: EnqueueCall) -> None:
        call.headers["big"] = "x" * 9000


class Suppresses(JobMiddleware):
    """An attempt wrap that swallows the job's exception (which must not make it succeed)."""

    @contextmanager
    def _around(self) -> Iterator[None]:
        with contextlib.suppress(Exception):
            yield

    def attempt(self, context: JobContext) -> AbstractContextManager[object]:
        return self._around()


class Raises(JobMiddleware):
    """An enqueue hook with a bug."""

    def enqueue(self, call: EnqueueCall) -> None:
        raise RuntimeError("middleware bug")


class NoHooks:
    """A class with neither hook (rqueue.E142)."""


not_a_class = object()
