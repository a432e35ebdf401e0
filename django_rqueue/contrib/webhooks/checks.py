"""System checks of the webhooks app: its HTTP client must be installed (E050) and
``RQUEUE["WEBHOOKS"]`` must be valid (E100-E102, W100: :func:`.conf.problems`)."""

from __future__ import annotations

import importlib.util
from typing import Any

from django.core import checks

from ...conf import raw_setting
from .conf import problems


@checks.register()
def check_httpx(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``rqueue.E050``: ``django_rqueue.contrib.webhooks`` is installed but httpx is not."""
    if importlib.util.find_spec("httpx") is not None:
        return []
    return [
        checks.Error(
            "django_rqueue.contrib.webhooks needs httpx",
            hint="pip install 'django-rqueue[webhooks]'",
            id="rqueue.E050",
        )
    ]


@checks.register()
def check_webhook_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``rqueue.E100``-``E102``, ``W100``: ``RQUEUE["WEBHOOKS"]`` (:func:`.conf.problems`)."""
    return problems(raw_setting())
