"""The hard timeout: the master kills a child whose job ran past its ``timeout`` plus the grace.

At ``timeout`` the child raises :class:`~django_rqueue.exceptions.JobTimeout` in
the job itself (soft); each running job has its own hard deadline,
``timeout + grace`` after the master heard its "start". When one passes, the
master SIGKILLs the child's process group; the attempts of the jobs past their
deadline then fail ("hard timeout after N s") and the child's other jobs go back
unspent (:mod:`~.losses`).
"""

from __future__ import annotations

import logging

from .children import Child, KillReason
from .process import kill_group

logger = logging.getLogger("django_rqueue.supervisor")


def stop_overrun(child: Child, now: float, grace: float) -> None:
    """Kill ``child`` if one of its running jobs passed its hard deadline at ``now``
    (``time.monotonic()``; ``grace`` in seconds), naming each such job in its ``culprits``."""
    for running in child.running.values():
        ran = now - running.started
        if running.timeout > 0 and ran >= running.timeout + grace:
            logger.warning(
                "%s %s: hard timeout after %.1f s; killing child %d",
                running.name,
                running.job_id,
                ran,
                child.pid,
            )
            child.culprits[running.job_id] = ran
    if child.culprits:
        child.killed_for = KillReason.TIMEOUT
        kill_group(child.pid)
