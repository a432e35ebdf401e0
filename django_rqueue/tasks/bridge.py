"""The ``django.tasks`` bridge: a task's job function, its job's ``TaskResult``, Django's signals.

A task's job function is a :class:`TaskJobFunction`, the ``TaskResult`` of its
job is :func:`task_result`'s, and Django's task signals are sent from ours.

:class:`~django_rqueue.tasks.backend.RQueueBackend` enqueues through it, and a worker runs
a task job through it (:func:`~django_rqueue.tasks.backend.task_job_function`); the
mapping and the signals are described in :mod:`django_rqueue.tasks.backend`.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import logging
import threading
import types
from collections.abc import Callable
from typing import Any

from django.dispatch import Signal
from django.utils import timezone

from .. import signals
from ..execution import eager_enqueued, error_fields
from ..job import FINISHED, Job, JobStatus
from ..job_functions import JobFunction
from ..options import JobOptions
from ..registry import TASK_PREFIX
from .api import (
    MODULE,
    Task,
    TaskContext,
    TaskError,
    TaskResult,
    TaskResultStatus,
    task_enqueued,
    task_finished,
    task_started,
)

__all__ = [
    "STATUSES",
    "TaskJobFunction",
    "job_function_at",
    "job_function_of",
    "ready_result",
    "send_enqueued",
    "task_result",
]

#: ``Job.status`` -> ``TaskResult.status``.
STATUSES = {
    JobStatus.WAITING: TaskResultStatus.READY,
    JobStatus.SCHEDULED: TaskResultStatus.READY,
    JobStatus.QUEUED: TaskResultStatus.READY,
    JobStatus.RUNNING: TaskResultStatus.RUNNING,
    JobStatus.SUCCEEDED: TaskResultStatus.SUCCESSFUL,
    JobStatus.FAILED: TaskResultStatus.FAILED,
    JobStatus.CANCELLED: TaskResultStatus.FAILED,
}


class TaskJobFunction(JobFunction[..., Any]):
    """The job function of one ``django.tasks`` task (one per module path, per process).

    :attr:`~.BaseJobFunction.func` is the task's own function (a coroutine function for
    an async task), :attr:`~.BaseJobFunction.name` ``"task:<module path>"``, and
    ``takes_context`` the task's: a worker calls ``func`` with a ``TaskContext`` first
    (``arguments``). Its own options are empty: each call's queue,
    priority and run-after come from the ``Task`` (:meth:`options_for`), so
    the rest comes from the queue's ``RQUEUE`` options. Signals are sent with
    this object as sender; it connects the receivers that send Django's.
    """

    def __init__(self, task: Task[..., Any], path: str) -> None:
        super().__init__(task.func, TASK_PREFIX + path, JobOptions())
        self.task = task
        self.takes_context = task.takes_context
        #: ``(queue, priority)`` -> the options / the Task, built once each.
        self._options: dict[tuple[str, int], JobOptions] = {}
        self._tasks: dict[tuple[str, int], Task[..., Any]] = {}
        eager_enqueued.connect(_enqueued_eagerly, sender=self, weak=False)
        signals.job_started.connect(_started, sender=self, weak=False)
        signals.job_succeeded.connect(_succeeded, sender=self, weak=False)
        signals.job_failed.connect(_failed, sender=self, weak=False)

    def __repr__(self) -> str:
        return f"<TaskJobFunction {self.name}>"

    def options_for(self, task: Task[..., Any]) -> JobOptions:
        """The job options of a call of ``task``: its queue, priority and run-after."""
        if task.run_after is not None:
            return JobOptions(queue=task.queue_name, priority=task.priority, run_at=task.run_after)
        key = (task.queue_name, task.priority)
        options = self._options.get(key)
        if options is None:
            options = self._options[key] = JobOptions(queue=task.queue_name, priority=task.priority)
        return options

    def task_for(self, job: Job[Any]) -> Task[..., Any]:
        """The task as ``job`` was enqueued: queue, priority and ``run_after``."""
        if job.task_run_after is not None:
            return self.task.using(
                queue_name=job.queue, priority=job.priority, run_after=job.task_run_after
            )
        key = (job.queue, job.priority)
        task = self._tasks.get(key)
        if task is None:
            task = self._tasks[key] = self.task.using(queue_name=job.queue, priority=job.priority)
        return task

    def arguments(self, job: Job[Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The job's arguments, after a ``TaskContext`` for a ``takes_context`` task
        (its ``attempt`` is 1 on the first run: it counts this attempt)."""
        if not self.takes_context:
            return tuple(job.args), job.kwargs
        context = TaskContext(task_result=self.result(job))
        return (context, *job.args), job.kwargs

    def result(self, job: Job[Any]) -> TaskResult[..., Any]:
        """``job`` (as this process holds it) as a ``TaskResult``."""
        task = self.task_for(job)
        return task_result(task, job, task.backend)

    def announce(self, signal: Signal, job: Job[Any]) -> None:
        """Send Django's ``signal`` for ``job`` (robustly: a receiver that raises is logged)."""
        task = self.task_for(job)
        sender = type(task.get_backend())
        signals.send(signal, sender, task_result=task_result(task, job, task.backend))


def task_result[**P, R](task: Task[P, R], job: Job[Any], alias: str) -> TaskResult[P, R]:
    """Map a task's job to a ``TaskResult`` of ``task`` (see the module docstring)."""
    status = STATUSES[job.status]
    worker_ids = [error.get("worker", "") for error in job.errors]
    if job.status in (JobStatus.RUNNING, JobStatus.SUCCEEDED):
        worker_ids.append(job.worker)
    result: TaskResult[P, R] = TaskResult(
        task=task,
        id=job.id,
        status=status,
        enqueued_at=job.enqueued_at,
        started_at=job.started_at,
        finished_at=job.finished_at if job.status in FINISHED else None,
        last_attempted_at=job.started_at,
        args=job.args,
        kwargs=job.kwargs,
        backend=alias,
        errors=[
            TaskError(exception_class_path=error["type"], traceback=error["traceback"])
            for error in job.errors
        ],
        worker_ids=worker_ids,
    )
    if status == TaskResultStatus.SUCCESSFUL:
        object.__setattr__(result, "_return_value", job.result)
    return result


#: The types ``normalize_json`` returns as they are (``bool`` and ``None`` included).
SCALARS = frozenset({str, int, float, bool, type(None)})


def _slot_setters() -> tuple[Callable[[object, object], None], ...] | None:
    """The setters of ``TaskResult``'s slots in :func:`ready_result`'s order, or ``None``
    when its fields are not exactly those (another Django or backport release) or are
    not slots: then :func:`ready_result` calls the constructor."""
    names = (
        "task",
        "id",
        "status",
        "enqueued_at",
        "started_at",
        "finished_at",
        "last_attempted_at",
        "args",
        "kwargs",
        "backend",
        "errors",
        "worker_ids",
        "_return_value",
    )
    if {field.name for field in dataclasses.fields(TaskResult)} != set(names):
        return None
    slots = [vars(TaskResult).get(name) for name in names]
    if not all(type(slot) is types.MemberDescriptorType for slot in slots):
        return None
    return tuple(slot.__set__ for slot in slots)  # type: ignore[union-attr]


_SETTERS = _slot_setters()


def ready_result[**P, R](
    task: Task[P, R], args: list[Any], kwargs: dict[str, Any], alias: str, *, plain: bool
) -> TaskResult[P, R]:
    """The ``READY`` ``TaskResult`` of a call of ``task`` about to be written: id ``""``, no
    times, errors, workers nor return value, its own copies of ``args`` and ``kwargs``.

    It equals ``TaskResult(task=task, id="", status=READY, ..., args=args, kwargs=kwargs,
    backend=alias, errors=[], worker_ids=[])``. ``args`` and ``kwargs`` must be JSON already
    (``normalize_json``'s); ``plain``: every value among them is a scalar (:data:`SCALARS`),
    as :func:`~django_rqueue.tasks.backend.json_arguments` says. A plain call's result is
    built without that constructor, whose ``__post_init__`` walks the arguments again with
    ``normalize_json`` (about 4 of the 5 µs it takes); any other, by the constructor.
    """
    setters = _SETTERS
    if not plain or setters is None:
        return TaskResult(
            task=task,
            id="",
            status=TaskResultStatus.READY,
            enqueued_at=None,
            started_at=None,
            finished_at=None,
            last_attempted_at=None,
            args=args,
            kwargs=kwargs,
            backend=alias,
            errors=[],
            worker_ids=[],
        )
    result: TaskResult[P, R] = object.__new__(TaskResult)
    setters[0](result, task)
    setters[1](result, "")
    setters[2](result, TaskResultStatus.READY)
    setters[3](result, None)
    setters[4](result, None)
    setters[5](result, None)
    setters[6](result, None)
    setters[7](result, list(args))
    setters[8](result, dict(kwargs))
    setters[9](result, alias)
    setters[10](result, [])
    setters[11](result, [])
    setters[12](result, None)
    return result


_framework_signals = importlib.import_module(f"{MODULE}.signals")
#: The receiver the tasks framework connects to ``task_enqueued`` itself
#: (``log_task_enqueued``: one DEBUG line): its key in ``Signal.receivers``
#: (``(id(receiver), id(sender))``, the sender ``None``, as ``Signal.connect`` makes it)
#: and the logger it writes to; ``None`` when this framework release has no such receiver.
_framework_log: tuple[tuple[int, int], logging.Logger] | None = None
if hasattr(_framework_signals, "log_task_enqueued") and hasattr(_framework_signals, "logger"):
    _framework_log = (
        (id(_framework_signals.log_task_enqueued), id(None)),
        _framework_signals.logger,
    )


def send_enqueued(sender: type[object], result: TaskResult[Any, Any]) -> None:
    """Send ``task_enqueued`` for ``result`` (robustly: a receiver that raises is logged).

    When its only receiver is the framework's own DEBUG log line and that logger does not
    log DEBUG, the send would do nothing and is skipped (it costs about 2 µs, on every
    enqueue). Any other receiver connected, or DEBUG on, and it is sent.
    """
    receivers, framework_log = task_enqueued.receivers, _framework_log
    if len(receivers) == 1 and framework_log is not None:
        try:
            only = receivers[0][0]
        except IndexError:  # another thread disconnected it meanwhile: send() finds none
            only = None
        if only == framework_log[0] and not framework_log[1].isEnabledFor(logging.DEBUG):
            return
    signals.send(task_enqueued, sender, task_result=result)


# -- resolving task jobs -----------------------------------------------------------

#: One TaskJobFunction per module path and per task function, for the life of the process
#: (each is a signal sender: a receiver connected to it must find the same object again).
_by_path: dict[str, TaskJobFunction] = {}
_by_func: dict[Callable[..., Any], TaskJobFunction] = {}
_lock = threading.Lock()


def job_function_of(task: Task[..., Any]) -> TaskJobFunction:
    """The job function behind ``task`` (and its ``.using()`` copies): the sender of the
    ``job_*`` signals of its jobs, e.g. ``job_failed.connect(alert, sender=job_function_of(t))``.
    """
    job_function = _by_func.get(task.func)
    if job_function is None:
        with _lock:
            path = task.module_path
            job_function = _by_path.get(path)
            if job_function is None:
                job_function = _by_path[path] = TaskJobFunction(task, path)
            _by_func[task.func] = job_function
    return job_function


def job_function_at(path: str) -> TaskJobFunction | None:
    """The job function already made for the task at module path ``path``, or ``None``."""
    return _by_path.get(path)


# -- Django's task_started / task_finished, from our signals (per sender) ----------


def _enqueued_eagerly(sender: TaskJobFunction, job: Job[Any], **kwargs: Any) -> None:
    # With RQUEUE["EAGER"] the job runs inside enqueue(): task_enqueued must come first.
    # Otherwise RQueueBackend.enqueue sends it, with the TaskResult it returns.
    sender.announce(task_enqueued, job)


def _started(sender: TaskJobFunction, job: Job[Any], **kwargs: Any) -> None:
    sender.announce(task_started, job)


def _succeeded(sender: TaskJobFunction, job: Job[Any], result: Any, **kwargs: Any) -> None:
    if job.status is JobStatus.RUNNING:  # a worker's copy (EAGER passes the finished job)
        job = dataclasses.replace(
            job,
            status=JobStatus.SUCCEEDED,
            result=result,
            error=None,
            finished_at=_now_after(job.started_at),
        )
    sender.announce(task_finished, job)


def _failed(
    sender: TaskJobFunction,
    job: Job[Any],
    exception: BaseException,
    traceback: str,
    **kwargs: Any,
) -> None:
    if job.status is JobStatus.RUNNING:  # a worker's copy, without this attempt's error
        error = error_fields(exception, traceback, worker=job.worker)
        job = dataclasses.replace(
            job,
            status=JobStatus.FAILED,
            error=error,
            errors=[*job.errors, error],
            finished_at=_now_after(job.started_at),
        )
    sender.announce(task_finished, job)


def _now_after(started: datetime.datetime | None) -> datetime.datetime:
    """Now (this host's clock), but never before ``started`` (the Redis clock's)."""
    now = timezone.now()
    return now if started is None or now >= started else started
