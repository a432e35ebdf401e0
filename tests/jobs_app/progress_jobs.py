"""Jobs that report progress and metadata (tests/test_progress.py): each reports, writes
``reported`` to its ledger, waits for the file ``gate`` (at most 60 s), then reports again."""

from __future__ import annotations

import asyncio
import os
import time

from django_rqueue import JobContext, job
from tests.jobs_app.jobs import write_ledger


@job(takes_context=True)
def progress_steps(context: JobContext, ledger: str, tag: str, gate: str) -> str:
    """Progress 1/3 "first" and metadata ``{"step": 1}``, then, once ``gate`` exists, 3/3."""
    context.set_progress(1, 3, "first")
    context.metadata["step"] = 1
    context.save_metadata()
    write_ledger(ledger, tag, "reported", token=context.job.token)
    deadline = time.monotonic() + 60
    while not os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.005)
    context.set_progress(3, 3, "done")
    context.metadata["step"] = 2
    context.save_metadata()
    return tag


@job(takes_context=True)
async def aprogress_steps(context: JobContext, ledger: str, tag: str, gate: str) -> str:
    """:func:`progress_steps` as an ``async def`` job, with the async methods."""
    await context.aset_progress(1, 3, "first")
    context.metadata["step"] = 1
    await context.asave_metadata()
    write_ledger(ledger, tag, "reported", token=context.job.token)
    deadline = time.monotonic() + 60
    while not os.path.exists(gate) and time.monotonic() < deadline:
        await asyncio.sleep(0.005)
    await context.aset_progress(3, 3, "done")
    context.metadata["step"] = 2
    await context.asave_metadata()
    return tag
