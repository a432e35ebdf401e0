"""System checks for the ``RQUEUE`` setting (``rqueue.E0xx`` errors, ``rqueue.W0xx`` warnings).

The ids and what they mean are listed in :func:`django_rqueue.conf.problems`.
The checks only read settings; they never connect to Redis. ``rqueue.E008``
(a ``TASKS`` queue that ``RQUEUE`` does not declare) is
:meth:`django_rqueue.backends.RQueueBackend.check`, which Django's own
``django.tasks`` check calls; importing ``django.tasks`` here registers that
check even in a project that imports no task before ``manage.py check``.
"""

from __future__ import annotations

from typing import Any

import django.tasks  # noqa: F401 - registers django.tasks.checks.check_tasks
from django.core.checks import CheckMessage, register

from .conf import problems, raw_setting


@register("rqueue")
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Report every problem of ``settings.RQUEUE``."""
    return problems(raw_setting())


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
