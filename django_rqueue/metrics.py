"""Alias of :mod:`django_rqueue.ops.metrics`, where URLconfs import ``metrics_view`` from.

Needs ``prometheus_client`` (``pip install "django-rqueue[prometheus]"``);
importing this module without it raises ``ImportError`` naming the extra.
"""

from __future__ import annotations

from .ops.metrics import QueueCollector, metrics_view

__all__ = ["QueueCollector", "metrics_view"]
