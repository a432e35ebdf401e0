"""``django.tasks`` on django-rqueue: :class:`RQueueBackend`, a backend for Django's ``TASKS``.

::

    TASKS = {
        "default": {
            "BACKEND": "django_rqueue.backends.RQueueBackend",
            "QUEUES": ["default", "emails"],  # optional: RQUEUE queues tasks may use
        }
    }

On Django 5.2 the ``django.tasks`` API comes from the ``django-tasks`` backport
(``pip install "django-rqueue[tasks]"``; :mod:`django_rqueue.tasks.api`), and
importing this module without it raises ``ImproperlyConfigured`` naming that
extra. The backend's path and behaviour are the same on every Django. Settings
name it at its public path, :mod:`django_rqueue.backends` (an alias of this module).

A task is an ordinary django-rqueue job: ``Task.enqueue()`` writes it with the
same ``enqueue.lua`` as ``.delay()`` (one round trip, inside
``transaction.atomic()`` on commit), ``rqueue_work`` runs it under a lease and
a fencing token, retries it with its queue's ``backoff`` up to its queue's
``max_attempts``, parks it in the failed store, and the admin, ``get_job()``
and ``rqueue_info`` show it. Its options are its queue's (``timeout``,
``max_attempts``, ``backoff``, ``result_ttl`` from ``RQUEUE["QUEUES"]`` and
``RQUEUE["DEFAULTS"]``); ``Task.priority`` is the job's priority and
``Task.run_after`` its run-at.

**Names.** A task's job is named ``"task:<module path>"``
(:data:`~django_rqueue.registry.TASK_PREFIX`). A worker imports that path
(:func:`task_job_function`), as every ``django.tasks`` worker does, and runs
the job only if the path is a ``django.tasks.Task`` whose backend is an
``RQueueBackend``; otherwise the attempt fails with
:class:`~django_rqueue.exceptions.UnknownJob` naming the module, the job goes
to the failed store and the worker goes on. Plain ``@job`` jobs are still
only looked up by name, never imported.

**Results.** ``TaskResult.id`` is the job id. ``get_result(id)`` reads the job
(one ``HGETALL``) and maps it:

========================  ================================================
job status                ``TaskResult.status``
========================  ================================================
scheduled, queued         ``READY`` (deferred, waiting, or waiting to retry)
running                   ``RUNNING``
succeeded                 ``SUCCESSFUL`` (``return_value`` = ``Job.result``)
failed, cancelled         ``FAILED``
========================  ================================================

``errors`` holds one ``TaskError`` per failed attempt (``Job.errors``, oldest
first). ``worker_ids`` holds one worker id per attempt: each failed attempt's
error record names its worker (made in Python before ``fail.lua``, or by
``reclaim.lua`` for an expired lease), and the running or succeeded attempt's
worker is the record's ``worker`` field, which a success keeps; so
``attempts == len(worker_ids)``, counted over the record's whole life (a
retry from the failed store keeps the history). ``enqueued_at``,
``started_at`` / ``last_attempted_at`` (both: when the latest attempt
started) and ``finished_at`` are Redis server times. ``task`` is the
module-level task with the queue, priority and ``run_after`` the job was
enqueued with. Unknown, expired or non-task ids raise
``TaskResultDoesNotExist``.

**Signals.** Ours (``job_*``, sender: the task's :class:`TaskJobFunction`)
and Django's (``task_enqueued``, ``task_started``, ``task_finished``, sender
the backend class, ``task_result=``) are both sent. ``task_enqueued`` is
sent by :meth:`RQueueBackend.enqueue` once the job is written (on commit
inside a transaction; with ``RQUEUE["EAGER"]`` just before ``job_enqueued``,
before the task runs); ``task_started`` and
``task_finished`` by receivers of ``job_started``, ``job_succeeded`` and
``job_failed`` connected per sender, to
each task's :class:`TaskJobFunction` only, so that jobs that are not tasks
keep being reserved in batches (a worker batches only jobs with no
``job_succeeded`` receiver).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, cast

from django.apps import apps
from django.core import checks
from django.core.checks import CheckMessage
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.utils.module_loading import import_string

from .. import enqueue
from ..conf import get_config
from ..engine.fields import JobFields
from ..exceptions import UnknownJob
from ..job import FINISHED, Job, get_job
from ..options import JobOptions
from ..registry import TASK_PREFIX
from .api import (
    BaseTaskBackend,
    InvalidTask,
    Task,
    TaskResult,
    TaskResultDoesNotExist,
    normalize_json,
)
from .bridge import (
    SCALARS,
    TaskJobFunction,
    job_function_at,
    job_function_of,
    ready_result,
    send_enqueued,
    task_result,
)

__all__ = ["RQueueBackend", "TaskJobFunction", "job_function_of", "task_job_function"]


def json_arguments(
    args: Sequence[Any], kwargs: Mapping[str, Any]
) -> tuple[list[Any], dict[str, Any], bool]:
    """``args`` and ``kwargs`` as ``django.tasks`` stores them (Django's ``normalize_json``:
    tuples become lists, ``bytes`` text), and whether every value is a plain scalar
    (:data:`~django_rqueue.tasks.bridge.SCALARS`, the common call: checked without a walk).

    Raises:
        TypeError: a value JSON cannot carry (``normalize_json``'s error).
        ValueError: ``bytes`` that are not UTF-8.
    """
    plain = True
    scalars = SCALARS
    if scalars.issuperset(map(type, args)):
        json_args = list(args)
    else:
        json_args, plain = cast("list[Any]", normalize_json(args)), False
    if not kwargs or all(
        type(key) is str and type(value) in scalars for key, value in kwargs.items()
    ):
        json_kwargs = dict(kwargs)
    else:
        json_kwargs, plain = cast("dict[str, Any]", normalize_json(kwargs)), False
    return json_args, json_kwargs, plain


def _make_result[**P, R](
    made: list[TaskResult[P, R]],
    task: Task[P, R],
    args: list[Any],
    kwargs: dict[str, Any],
    alias: str,
    plain: bool,
) -> None:
    """Append the call's :func:`~.bridge.ready_result` to ``made`` (``enqueue``'s overlap)."""
    made.append(ready_result(task, args, kwargs, alias, plain=plain))


class RQueueBackend(BaseTaskBackend):
    """Run ``django.tasks`` tasks as django-rqueue jobs (see the module docstring).

    ``TASKS[alias]["QUEUES"]`` (optional) lists the ``RQUEUE["QUEUES"]``
    queues its tasks may use; without it, every declared queue is allowed.
    ``validate_task`` (run by ``@task`` and ``.using()``) raises
    ``InvalidTask`` for any other queue; ``manage.py check`` reports a
    ``QUEUES`` entry that ``RQUEUE`` does not declare (``rqueue.E008``).
    Nothing here touches Redis before the first enqueue or read.
    """

    #: Its public path, the one settings name (``sender`` of Django's task signals).
    __module__ = "django_rqueue.backends"

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        if "QUEUES" not in params:
            self.queues = set()  # Django's default is {"default"}; ours: every RQUEUE queue
        #: Tasks (without ``run_after``) that passed validate_task under ``_valid_for``.
        self._valid: set[Task[..., Any]] = set()
        self._valid_for: object = None
        #: The last task enqueued (without ``run_after``), the ``RQUEUE`` config it was
        #: validated under, its job function and options (:meth:`_prepare`).
        self._last: tuple[Task[..., Any], object, TaskJobFunction, JobOptions] | None = None

    def validate_task(self, task: Task[..., Any]) -> None:
        """Django's checks, then: ``task.queue_name`` is declared in ``RQUEUE["QUEUES"]``.

        Raises:
            InvalidTask: the task cannot run on this backend (the message says why).
        """
        super().validate_task(task)
        try:
            declared = get_config().queues
        except ImproperlyConfigured:
            return  # RQUEUE itself is broken: its system checks report it
        if task.queue_name not in declared:
            raise InvalidTask(
                f"Queue {task.queue_name!r} is not declared in RQUEUE['QUEUES'] "
                f"(declared: {', '.join(sorted(declared))})."
            )

    def enqueue[**P, R](
        self, task: Task[P, R], args: list[Any], kwargs: dict[str, Any]
    ) -> TaskResult[P, R]:
        """Write ``task``'s call as a job (one round trip) and return its ``READY`` result.

        ``args`` and ``kwargs`` must be JSON as ``django.tasks`` defines it
        (``normalize_json``: tuples become lists); they are checked before
        anything is written. Inside ``transaction.atomic()`` the job is
        written on commit (``enqueued_at`` is ``None`` until then), like
        ``.delay()``. With ``RQUEUE["EAGER"]`` the task runs inline and the
        result is finished.

        ``task_enqueued`` is sent once the job is written (not for a call
        captured by ``capture_jobs()``). ``task`` is validated again here
        (:meth:`validate_task`), as the settings may have changed since it was
        made (``@task``, ``.using()``); a task without ``run_after`` is
        validated once per task and settings.

        Raises:
            InvalidTask: the task cannot run on this backend now, e.g. its queue is
                no longer in ``TASKS[alias]["QUEUES"]`` or ``RQUEUE["QUEUES"]``
                (nothing written).
            TypeError: the arguments do not fit the task's signature, or one is
                not JSON (nothing written).
            ValueError: an argument cannot be decoded (``bytes`` that are not
                UTF-8).
            RedisUnavailable: Redis cannot be reached (nothing written).
            NotReplicated: ``RQUEUE["MIN_REPLICAS_ACK"]`` replicas did not confirm
                the job in time; it was written to the master (its id, the
                result's, is in ``job_ids``), ``task_enqueued`` was not sent.
        """
        job_function, options = self._prepare(task)
        args, kwargs, plain = json_arguments(args, kwargs)  # before anything is written
        made: list[TaskResult[P, R]] = []
        # Run by submit() while Redis runs the write, when it is written now.
        make_result = functools.partial(_make_result, made, task, args, kwargs, self.alias, plain)
        fields = None
        if task.run_after is not None:
            fields = {JobFields.TASK_RUN_AFTER: task.run_after.isoformat()}
        job = enqueue.submit(job_function, args, kwargs, options, fields, make_result)
        if made:  # written now (the common call: the least code after the wait)
            result = made[0]
            object.__setattr__(result, "id", job.id)
            object.__setattr__(result, "enqueued_at", job.enqueued_at)  # as _enqueued()
            send_enqueued(type(self), result)
            return result
        if job.status in FINISHED:  # RQUEUE["EAGER"]: it ran inline (task_enqueued was sent)
            return task_result(task, job, self.alias)
        # Not written now: captured, deferred to the commit, or written and waiting for
        # replicas (a task's job function never sets on_commit=False, as submit() reads).
        make_result()
        result = made[0]
        object.__setattr__(result, "id", job.id)
        if enqueue.capture.get() is not None:
            return result  # captured by django_rqueue.testing: nothing was written
        if transaction.get_connection().in_atomic_block:
            # After the job's own on_commit callback, which writes it.
            transaction.on_commit(functools.partial(self._enqueued, result, job))
        else:
            self._enqueued(result, job)
        return result

    def _prepare(self, task: Task[..., Any]) -> tuple[TaskJobFunction, JobOptions]:
        """:meth:`_validate_for_enqueue`, then ``task``'s job function and the options of a
        call; the last task's are kept (a frozen ``Task``: the same object, the same answer
        while ``RQUEUE`` is the same), so that a run of calls of one task skips all three."""
        try:
            config: object = get_config()
        except ImproperlyConfigured:
            config = None
        last = self._last
        if last is not None and last[0] is task and last[1] is config:
            return last[2], last[3]
        self._validate_for_enqueue(task)
        job_function = job_function_of(task)
        options = job_function.options_for(task)
        if task.run_after is None and config is not None:
            self._last = (task, config, job_function, options)
        return job_function, options

    def _validate_for_enqueue(self, task: Task[..., Any]) -> None:
        """:meth:`validate_task`, remembered for tasks without ``run_after`` until ``RQUEUE``
        changes (this backend is made anew when ``TASKS`` changes)."""
        if task.run_after is not None:
            self.validate_task(task)
            return
        try:
            config: object = get_config()
        except ImproperlyConfigured:
            config = None
        if config is not self._valid_for:
            self._valid.clear()
            self._valid_for = config
        if task not in self._valid:
            self.validate_task(task)
            self._valid.add(task)

    def _enqueued(self, result: TaskResult[Any, Any], job: Job[Any]) -> None:
        # The time the job's record holds (Redis's clock, from the enqueue's reply), so that
        # the result equals what get_result() reads.
        object.__setattr__(result, "enqueued_at", job.enqueued_at)
        send_enqueued(type(self), result)

    def get_result(self, result_id: str) -> TaskResult[..., Any]:
        """Read the task's job from Redis (one ``HGETALL``) as a ``TaskResult``.

        Raises:
            TaskResultDoesNotExist: no such job (never enqueued, expired after
                its queue's ``result_ttl``, deleted), a job that is not a task,
                or a task whose module path no longer resolves to one of ours.
            RedisUnavailable: Redis cannot be reached.
        """
        job = get_job(result_id) if isinstance(result_id, str) else None
        if job is None or not job.name.startswith(TASK_PREFIX):
            raise TaskResultDoesNotExist(result_id)
        try:
            job_function = task_job_function(job.name.removeprefix(TASK_PREFIX))
        except UnknownJob as exc:
            raise TaskResultDoesNotExist(f"{result_id}: {exc}") from exc
        return task_result(job_function.task_for(job), job, self.alias)

    def check(self, **kwargs: Any) -> list[CheckMessage]:
        """``rqueue.E009`` when ``django_rqueue`` is not in ``INSTALLED_APPS``; ``rqueue.E008``
        for each ``QUEUES`` entry that ``RQUEUE["QUEUES"]`` does not declare."""
        found: list[CheckMessage] = []
        if not apps.is_installed("django_rqueue"):
            found.append(
                checks.Error(
                    f"TASKS[{self.alias!r}] uses django_rqueue.backends.RQueueBackend, but "
                    "'django_rqueue' is not in INSTALLED_APPS.",
                    hint="Add 'django_rqueue' to INSTALLED_APPS (its system checks, admin "
                    "and management commands, such as rqueue_work, come with it).",
                    obj=f"TASKS[{self.alias!r}]",
                    id="rqueue.E009",
                )
            )
        try:
            declared = get_config().queues
        except ImproperlyConfigured:
            return found  # the rqueue.E0xx checks report it
        return found + [
            checks.Error(
                f"TASKS[{self.alias!r}]['QUEUES'] names queue {name!r}, which is not declared "
                "in RQUEUE['QUEUES'].",
                hint="Declare it in RQUEUE['QUEUES'] or remove it from TASKS.",
                obj=f"TASKS[{self.alias!r}]",
                id="rqueue.E008",
            )
            for name in sorted(self.queues)
            if name not in declared
        ]


# -- resolving task jobs -----------------------------------------------------------


def _may_import(module: str) -> bool:
    """Whether ``module`` is one of, or inside, an installed app or a ``TASK_MODULES`` entry."""
    roots = [app.name for app in apps.get_app_configs()] + list(get_config().task_modules)
    return any(module == root or module.startswith(root + ".") for root in roots)


def task_job_function(path: str) -> TaskJobFunction:
    """The job function of the task at module path ``path`` (imported on first use).

    Only a path inside an installed app or a ``RQUEUE["TASK_MODULES"]`` entry is
    imported: a job name read from Redis never makes a worker import (and so run
    the top-level code of) any other module.

    Raises:
        UnknownJob: ``path`` is outside those modules (not imported), cannot be
            imported (the message names the module and why, ``SystemExit``
            included), or is not a ``django.tasks.Task`` whose backend is an
            :class:`RQueueBackend`.
    """
    job_function = job_function_at(path)
    if job_function is not None:
        return job_function
    module = path.rpartition(".")[0]
    if not _may_import(module):
        raise UnknownJob(
            f"task {path!r}: its module {module!r} is not in an installed app nor in "
            "RQUEUE['TASK_MODULES'], so it was not imported"
        )
    try:
        task = import_string(path)
    except (Exception, SystemExit) as exc:  # ImportError, or what the module raised at import
        reason = str(exc) if isinstance(exc, ImportError) else f"{type(exc).__name__}: {exc}"
        raise UnknownJob(f"task {path!r} cannot be imported: {reason}") from exc
    if not isinstance(task, Task):
        raise UnknownJob(f"{path!r} is not a django.tasks Task but a {type(task).__name__}")
    try:
        backend = task.get_backend()
    except ImproperlyConfigured as exc:  # InvalidTaskBackend: no such TASKS alias
        raise UnknownJob(f"task {path!r}: {exc}") from exc
    if not isinstance(backend, RQueueBackend):
        raise UnknownJob(
            f"task {path!r} uses TASKS[{task.backend!r}], {type(backend).__name__}, "
            "not django_rqueue.backends.RQueueBackend"
        )
    return job_function_of(task)
