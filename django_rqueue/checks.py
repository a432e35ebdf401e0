"""System checks for the ``RQUEUE`` setting (``rqueue.E0xx`` errors, ``rqueue.W0xx`` warnings).

The ids and what they mean are listed in :func:`django_rqueue.conf.validation.problems`,
and per key in the rows of :mod:`django_rqueue.conf.settings` (the README's settings
tables); :func:`check_schedule` for a schedule's jobs.
The checks only read settings; they never connect to Redis. ``rqueue.E008``
(a ``TASKS`` queue that ``RQUEUE`` does not declare) is
:meth:`django_rqueue.backends.RQueueBackend.check`, which Django's own
``django.tasks`` check calls; importing :mod:`django_rqueue.tasks.api` here
registers that check even in a project that imports no task before
``manage.py check``. On Django 5.2 without the ``django-tasks`` backport there
is no tasks framework, hence no backend to check, and the other checks run as usual.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.checks import CheckMessage, Error, register
from django.core.exceptions import ImproperlyConfigured

from . import middleware
from .conf import get_config, parse, problems, raw_setting, schedule_queues
from .periodic import entries as schedule_entries
from .registry import DISCOVERY_HINT, autodiscover
from .registry import get as registered

try:
    from .tasks import api  # noqa: F401 - registers the tasks framework's check_tasks
except ImproperlyConfigured:  # Django 5.2 without the backport: no tasks framework
    pass


@register("rqueue")
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Report every problem of ``settings.RQUEUE``."""
    return problems(raw_setting())


@register("rqueue")
def check_middleware(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Report ``RQUEUE["MIDDLEWARE"]`` classes that do not import or have no hook (E141,
    E142: :func:`django_rqueue.middleware.check`)."""
    raw = raw_setting()
    return middleware.check(raw.get("MIDDLEWARE", ())) if isinstance(raw, Mapping) else []


@register("rqueue")
def check_schedule(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Report ``RQUEUE["SCHEDULE"]`` entries whose job is unknown or does not take their arguments.

    E023: no ``@job`` of the entry's name is registered once the ``jobs``
    module of every installed app is imported (the check imports them, as a
    worker does at start: the apps are ready when checks run, so the
    registry is complete here, and a job defined elsewhere must be imported
    by its app's ``jobs`` module). E024: the entry's ``args``/``kwargs`` do
    not bind to the job's signature or cannot be sent as JSON. E025: the
    job's own queue is not declared. Every entry is looked at in one run,
    beside the errors :func:`check_settings` reports: E023 for any entry that
    names a job; E024 and E025 for the entries without errors of their own,
    while the rest of ``RQUEUE`` has none.
    """
    raw = raw_setting()
    entries = raw.get("SCHEDULE") if isinstance(raw, Mapping) else None
    if not isinstance(raw, Mapping) or not isinstance(entries, Mapping):
        return []
    # Imported on use: periodic brings in the whole enqueue path, which these
    # checks (imported by RqueueConfig.ready()) need only when there is a schedule.
    from .periodic.runtime import resolve

    queues = schedule_queues(raw)
    valid = {n: e for n, e in entries.items() if not schedule_entries.problems({n: e}, queues)}
    usable = {**raw, "SCHEDULE": valid}
    config = None if any(p.is_serious() for p in problems(usable)) else parse(usable)
    autodiscover()
    found: list[CheckMessage] = []
    for name, entry in entries.items():
        where = f"RQUEUE['SCHEDULE'][{name!r}]"
        job = entry.get("job") if isinstance(entry, Mapping) else None
        if isinstance(job, str) and job and registered(job) is None:
            found.append(
                Error(
                    f"{where}['job'] {job!r} is not a registered @job.",
                    hint="Name a job by its registered name (default '<module>.<function>'). "
                    f"{DISCOVERY_HINT}.",
                    id="rqueue.E023",
                )
            )
            continue
        if config is None or name not in valid:
            continue
        try:
            resolve(config.schedule[name], config)
        except TypeError as exc:
            found.append(Error(f"{where} arguments do not fit its job: {exc}", id="rqueue.E024"))
        except ValueError as exc:
            found.append(Error(f"{where}: {exc}", id="rqueue.E025"))
    return found


@register("rqueue", deploy=True)
def check_redis(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """With ``--deploy``: connect to each Redis in use and check it can hold jobs safely.

    Ids from :func:`django_rqueue.ops.health.redis_problems`: E010 eviction
    policy, E011 credentials, E012 scripting permission, E013 unreachable,
    E014 TLS certificate refused, W010 no persistence. Skipped while ``RQUEUE`` itself has errors.
    """
    if any(p.is_serious() for p in problems(raw_setting())):
        return []
    # Imported on use: only ``check --deploy`` connects to Redis.
    from .ops.health import problems_for

    return problems_for(list(get_config().queues))
