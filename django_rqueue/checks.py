"""System checks for the ``RQUEUE`` setting (``rqueue.E0xx`` errors, ``rqueue.W0xx`` warnings).

The ids and what they mean are listed in :func:`django_rqueue.conf.problems`
(and :func:`check_schedule` for a schedule's jobs).
The checks only read settings; they never connect to Redis. ``rqueue.E008``
(a ``TASKS`` queue that ``RQUEUE`` does not declare) is
:meth:`django_rqueue.backends.RQueueBackend.check`, which Django's own
``django.tasks`` check calls; importing :mod:`django_rqueue.tasks_api` here
registers that check even in a project that imports no task before
``manage.py check``. On Django 5.2 without the ``django-tasks`` backport there
is no tasks framework, hence no backend to check, and the other checks run as usual.
"""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, register
from django.core.exceptions import ImproperlyConfigured

from .conf import problems, raw_setting
from .exceptions import UnknownJob

try:
    from . import tasks_api  # noqa: F401 - registers the tasks framework's check_tasks
except ImproperlyConfigured:  # Django 5.2 without the backport: no tasks framework
    pass


@register("rqueue")
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Report every problem of ``settings.RQUEUE``."""
    return problems(raw_setting())


@register("rqueue")
def check_schedule(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Report ``RQUEUE["SCHEDULE"]`` entries whose job is unknown or does not take their arguments.

    E023: no ``@job`` of the entry's name is registered once the ``jobs``
    module of every installed app is imported (the check imports them, as a
    worker does at start: the apps are ready when checks run, so the
    registry is complete here, and a job defined elsewhere must be imported
    by its app's ``jobs`` module). E024: the entry's ``args``/``kwargs`` do
    not bind to the job's signature or cannot be sent as JSON. E025: the
    job's own queue is not declared. Skipped while ``RQUEUE`` has errors
    (the shape of the entries is checked with them).
    """
    if any(p.is_serious() for p in problems(raw_setting())):
        return []
    from django.core import checks

    from .conf import get_config
    from .periodic import resolve
    from .registry import autodiscover

    autodiscover()
    found: list[CheckMessage] = []
    for name, entry in get_config().schedule.items():
        where = f"RQUEUE['SCHEDULE'][{name!r}]"
        try:
            resolve(entry)
        except UnknownJob:
            found.append(
                checks.Error(
                    f"{where}['job'] {entry.job!r} is not a registered @job.",
                    hint="Name a job by its registered name (default '<module>.<function>') "
                    "and define it in (or import it from) an installed app's jobs module.",
                    id="rqueue.E023",
                )
            )
        except TypeError as exc:
            found.append(
                checks.Error(f"{where} arguments do not fit its job: {exc}", id="rqueue.E024")
            )
        except ValueError as exc:
            found.append(checks.Error(f"{where}: {exc}", id="rqueue.E025"))
    return found


@register("rqueue", deploy=True)
def check_redis(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """With ``--deploy``: connect to each Redis in use and check it can hold jobs safely.

    Ids from :func:`django_rqueue.health.redis_problems`: E010 eviction
    policy, E011 credentials, E012 scripting permission, E013 unreachable,
    W010 no persistence. Skipped while ``RQUEUE`` itself has errors.
    """
    if any(p.is_serious() for p in problems(raw_setting())):
        return []
    from .conf import get_config
    from .health import problems_for

    return problems_for(list(get_config().queues))
