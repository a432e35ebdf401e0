"""System check of the webhooks app: its HTTP client must be installed."""

from __future__ import annotations

import importlib.util
from typing import Any

from django.core import checks


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
