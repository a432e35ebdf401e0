"""The master's startup: the Redis gate (wait until a Redis of the queues answers, refuse a
misconfigured one) and the log of the jobs it can run.

``rqueue_work``'s master runs :func:`check_redis`, then :func:`log_registry`, before it
forks a child.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from django.core.checks import CheckMessage

from .. import registry
from ..exceptions import RedisUnavailable, StartupError
from ..health import NO_UNBLOCK, problems_by_server
from ..worker.blocking import unblock_refused
from ..worker.reconnect import Reconnect

logger = logging.getLogger("django_rqueue.supervisor")

#: The check id of a Redis that does not answer (:func:`~django_rqueue.health.redis_problems`).
UNREACHABLE = "rqueue.E013"


def unreachable(problems: list[CheckMessage]) -> bool:
    """Whether the problems of one Redis say it (or a node of its cluster) does not answer."""
    return any(p.id == UNREACHABLE for p in problems)


def check_redis(
    queues: list[str],
    *,
    worker_id: str,
    stopped: Callable[[], bool],
    unavailable: Callable[[RedisUnavailable], None],
    recovered: Callable[[float], None],
) -> None:
    """Refuse to start on a misconfigured Redis; log warnings.

    Waits (with backoff) while no Redis of ``queues`` answers, until ``stopped()``
    says a signal came; starts once one does, with a warning naming each that does
    not (the worker serves the others and keeps trying it:
    :mod:`~django_rqueue.worker.outages`). ``unavailable`` is called with the first
    failure when the wait begins, ``recovered`` with its length in seconds when a
    Redis answers after one. ``worker_id`` names the master in the log.

    Raises:
        StartupError: an error-level problem of a Redis that answers (eviction
            policy, credentials, a command or key pattern its user's ACL lacks).
    """
    errors = []
    reconnect = Reconnect()
    found = problems_by_server(queues)
    down_since = None
    while all(unreachable(p) for p in found.values()) and not stopped():
        if down_since is None:
            down_since = time.monotonic()
            first = next(p for ps in found.values() for p in ps if p.id == UNREACHABLE)
            unavailable(RedisUnavailable(first.msg))
        delay = reconnect.next_delay()
        reasons = "; ".join(p.msg for ps in found.values() for p in ps if p.id == UNREACHABLE)
        logger.error(
            "worker %s: no Redis of its queues answers (%s); retrying in %.1f s",
            worker_id,
            reasons,
            delay,
        )
        time.sleep(delay)
        found = problems_by_server(queues)
    if stopped():
        return  # stopped before any Redis answered: nothing was started
    if down_since is not None and not all(unreachable(p) for p in found.values()):
        recovered(time.monotonic() - down_since)
    for server, problems in found.items():
        if any(p.id == NO_UNBLOCK for p in problems):  # warned below; children inherit it
            unblock_refused(server, server.display, report=False)
    for problem in (p for problems in found.values() for p in problems):
        if problem.id == UNREACHABLE:
            logger.warning(
                "worker %s: starting without it: %s (its queues are served once it answers)",
                worker_id,
                problem.msg,
            )
        elif problem.is_serious():
            errors.append(f"{problem.id}: {problem.msg} {problem.hint or ''}".strip())
        else:
            logger.warning("%s: %s %s", problem.id, problem.msg, problem.hint or "")
    if errors:
        raise StartupError("refusing to start:\n" + "\n".join(errors))


def log_registry(worker_id: str) -> None:
    """Log how many jobs the worker ``worker_id`` can run and from which modules (each name
    at DEBUG, ``-v 2``)."""
    by_module = registry.modules()
    count = sum(len(names) for names in by_module.values())
    if not count:
        logger.warning(
            "worker %s: no @job is registered (workers import the 'jobs' module of every "
            "app in INSTALLED_APPS); only django.tasks tasks can run",
            worker_id,
        )
        return
    logger.info(
        "worker %s: %d job(s) registered from %s",
        worker_id,
        count,
        ", ".join(by_module),
    )
    for names in by_module.values():
        for name in names:
            logger.debug("worker %s: job %s", worker_id, name)
