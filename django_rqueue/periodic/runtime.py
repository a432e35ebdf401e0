"""Periodic entries at run time: resolve them to jobs, read their state, run now, pause, resume.

An entry of ``RQUEUE["SCHEDULE"]`` (:mod:`django_rqueue.periodic.entries`) names a
job; :func:`resolve` finds that job in the registry (after autodiscovery of
the apps' ``jobs`` modules) and works out the queue, priority and group its
runs get: the entry's own, else the job's (``@job(...)``, then the queue's
and the project's defaults, as for ``.delay()``). The state of each entry
(next tick, latest run, pause) lives in Redis on that queue
(:mod:`django_rqueue.engine.keys`); the pollers' scheduler
(:mod:`django_rqueue.worker.scheduler`) claims the ticks.
"""

from __future__ import annotations

import datetime
import inspect
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .. import registry, signals
from ..conf import Config, get_config
from ..engine import commands
from ..engine.connection import as_text, ms_to_datetime, redis_errors, wrong_type
from ..engine.fields import EntryFields
from ..engine.queue_ref import queue_ref
from ..engine.replies import Enqueued, EnqueueOutcome
from ..engine.run import execute
from ..enqueue import Plan, Submission
from ..exceptions import UnknownEntry, UnknownJob
from ..job import Job, JobStatus, get_job
from ..options import JobOptions
from ..types import JobSpec
from .entries import ScheduleEntry

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ResolvedEntry:
    """An entry together with the job it runs and the options its runs get."""

    entry: ScheduleEntry
    job_function: JobSpec
    plan: Plan

    @property
    def queue(self) -> str:
        return self.plan.queue

    def submission(self) -> Submission:
        """A new job of this entry (a fresh id), validated and encoded (``TypeError``).

        A run is not lost to a failing ``RQUEUE["MIDDLEWARE"]`` enqueue hook (it would stop
        the poller's schedule too): the error is logged and the job goes without headers.
        """
        args, kwargs, name = self.entry.args, self.entry.kwargs, self.entry.name
        if not self.plan.enqueue_hooks:
            return self.plan.submission(args, kwargs)
        try:
            return self.plan.submission(args, kwargs, entry=name)
        except Exception:
            logger.exception("periodic entry %s: a job middleware failed; run without it", name)
            return self.plan.submission(args, kwargs, hooks=False)  # raises what is not theirs


def resolve(entry: ScheduleEntry, config: Config | None = None) -> ResolvedEntry:
    """Find ``entry``'s job and the options its runs get (under ``config``, by default
    :func:`~django_rqueue.conf.get_config`'s).

    Call :func:`django_rqueue.registry.autodiscover` once first (the
    functions of this module that take an entry name do).

    Raises:
        UnknownJob: no ``@job`` of that name is registered.
        ValueError: the resolved queue is not declared.
        TypeError: the entry's ``args``/``kwargs`` do not bind to the job's
            signature, or JSON cannot carry them.
    """
    job_function = registry.get(entry.job)
    if job_function is None:
        raise UnknownJob(f"no @job named {entry.job!r} is registered")
    options = job_function.options.merged(
        JobOptions(queue=entry.queue, priority=entry.priority, group=entry.group)
    )
    plan = Plan.of(job_function, config or get_config(), options)
    resolved = ResolvedEntry(entry, job_function, plan)
    parameters = list(inspect.signature(job_function.func).parameters.values())
    carried = inspect.Signature(parameters[int(job_function.takes_context) :])
    carried.bind(*entry.args, **entry.kwargs)
    # The arguments must encode, before any tick is claimed (no job: no middleware).
    plan.submission(entry.args, entry.kwargs, hooks=False)
    return resolved


def entry(name: str) -> ScheduleEntry:
    """The entry ``name`` of ``RQUEUE["SCHEDULE"]`` (:class:`UnknownEntry` if none)."""
    registry.autodiscover()
    try:
        return get_config().schedule[name]
    except KeyError:
        raise UnknownEntry(f"no schedule entry named {name!r}") from None


def tick_datetime(tick_ms: int) -> datetime.datetime:
    """A tick (ms since the epoch) as an aware UTC datetime."""
    return datetime.datetime.fromtimestamp(tick_ms / 1000, tz=datetime.UTC)


def announce(resolved: ResolvedEntry, submission: Submission, reply: Enqueued) -> Job[Any]:
    """Apply an enqueue reply to ``submission``'s job and return it (the unique key's holder
    for a duplicate); send ``job_enqueued`` when a job was created."""
    outcome, job_id, state = reply
    job = submission.job
    if outcome is EnqueueOutcome.DUPLICATE:
        return get_job(job_id) or job
    job.status = JobStatus(state)
    if outcome is EnqueueOutcome.CREATED:
        signals.send(signals.job_enqueued, resolved.job_function, job=job)
    return job


def run_now(name: str) -> Job[Any]:
    """Enqueue entry ``name``'s job now, even while it is paused; its ticks are unchanged.

    The run is recorded as the entry's latest. Returns the job (the holder
    of the job's unique key, when one holds it).

    Raises:
        UnknownEntry: no such entry.
        UnknownJob, ValueError, TypeError: as :func:`resolve`.
        RedisUnavailable: Redis cannot be reached.
    """
    resolved = resolve(entry(name))
    submission = resolved.submission()
    ref = queue_ref(resolved.queue)
    command = commands.schedule_run_now(ref.keys, submission.new_job(), entry=name)
    reply = execute(ref.client(), command)
    return announce(resolved, submission, reply)


def pause(name: str) -> None:
    """Pause entry ``name``: its ticks pass without a job until :func:`resume` (no catch-up).

    Raises the errors of :func:`run_now` (but never ``TypeError``).
    """
    resolved = resolve(entry(name))
    ref = queue_ref(resolved.queue)
    client = ref.client()
    with redis_errors(client):
        client.hset(ref.keys.schedule_entry(name), EntryFields.PAUSED, "1")


def resume(name: str) -> None:
    """Resume entry ``name``: it runs again from its next tick. Raises as :func:`pause`."""
    resolved = resolve(entry(name))
    ref = queue_ref(resolved.queue)
    client = ref.client()
    with redis_errors(client):
        client.hdel(ref.keys.schedule_entry(name), EntryFields.PAUSED)


@dataclass(frozen=True)
class EntryState:
    """One entry as the admin and ``rqueue_info`` show it."""

    entry: ScheduleEntry
    #: The queue its runs go to (``None`` when :attr:`error` says why it cannot run).
    queue: str | None
    #: Why the entry cannot run (its job is unknown, its state in Redis is unreadable...),
    #: or ``""``.
    error: str
    #: The next tick (UTC), or ``None`` until a poller has stored it.
    next_run: datetime.datetime | None
    #: The tick (or the "run now" time) of the latest run, UTC.
    last_run: datetime.datetime | None
    #: The id of the latest run's job, or ``""``.
    last_job_id: str
    paused: bool

    @property
    def name(self) -> str:
        return self.entry.name


def entry_states(names: Iterable[str] | None = None) -> list[EntryState]:
    """The state of the entries ``names`` (default: all), in that order (default: by name).

    Two reads per entry, pipelined per queue: O(len(names)).

    Raises:
        UnknownEntry: a name is not an entry.
        RedisUnavailable: Redis cannot be reached.
    """
    schedule = get_config().schedule
    wanted = sorted(schedule) if names is None else list(names)
    registry.autodiscover()
    resolved: dict[str, ResolvedEntry | str] = {}
    for name in wanted:
        if name not in schedule:
            raise UnknownEntry(f"no schedule entry named {name!r}")
        try:
            resolved[name] = resolve(schedule[name])
        except (UnknownJob, ValueError, TypeError) as exc:
            resolved[name] = str(exc)
    raw: dict[str, tuple[Any, list[Any]]] = {}
    corrupt: dict[str, str] = {}
    by_queue: dict[str, list[str]] = {}
    for name, item in resolved.items():
        if isinstance(item, ResolvedEntry):
            by_queue.setdefault(item.queue, []).append(name)
    for queue, queue_names in by_queue.items():
        ref = queue_ref(queue)
        keys, client = ref.keys, ref.client()
        with redis_errors(client):
            pipe = client.pipeline(transaction=False)
            for name in queue_names:
                pipe.zscore(keys.schedule, name)
                pipe.hmget(
                    keys.schedule_entry(name),
                    [EntryFields.LAST, EntryFields.JOB, EntryFields.PAUSED],
                )
            replies = pipe.execute(raise_on_error=False)
        for i, name in enumerate(queue_names):
            score, fields = replies[2 * i], replies[2 * i + 1]
            errors = [r for r in (score, fields) if isinstance(r, Exception)]
            for error in errors:
                if not wrong_type(error):
                    raise error
            if errors:  # a key of another type where its state should be
                corrupt[name] = f"its state in Redis is unreadable ({errors[0]})"
                score, fields = None, [None, None, None]
            raw[name] = (score, fields)
    states = []
    for name in wanted:
        item = resolved[name]
        if isinstance(item, str):
            states.append(EntryState(schedule[name], None, item, None, None, "", False))
            continue
        score, (last, job_id, paused) = raw[name]
        states.append(
            EntryState(
                entry=item.entry,
                queue=item.queue,
                error=corrupt.get(name, ""),
                next_run=ms_to_datetime(score),
                last_run=ms_to_datetime(last),
                last_job_id=as_text(job_id) if job_id else "",
                paused=as_text(paused) == "1" if paused else False,
            )
        )
    return states
