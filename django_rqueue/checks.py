"""System checks for the ``RQUEUE`` setting (``rqueue.E0xx`` errors, ``rqueue.W0xx`` warnings).

The ids and what they mean are listed in :func:`django_rqueue.conf.problems`.
The checks only read settings; they never connect to Redis.
"""

from __future__ import annotations

from typing import Any

from django.core import checks
from django.core.checks import CheckMessage, register

from .conf import problems, raw_setting


@register("rqueue")
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:  # noqa: ANN401
    """Report every problem of ``settings.RQUEUE``."""
    messages: list[CheckMessage] = []
    for problem in problems(raw_setting()):
        kind = checks.Error if problem.is_error else checks.Warning
        messages.append(kind(problem.msg, hint=problem.hint or None, id=problem.id))
    return messages
