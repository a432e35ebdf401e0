"""Webhook delivery as a job (HTTP callbacks to a partner, retried until accepted).

Add ``"django_rqueue.contrib.webhooks"`` to ``INSTALLED_APPS`` (workers then find its
job) and install the extra ``django-rqueue[webhooks]`` (httpx). Then::

    from django_rqueue.contrib.webhooks import deliver

    deliver.delay("https://example.com/hooks/order", {"order": 42}, secret=signing_key)

:func:`webhook_job` declares a delivery job of your own, with its own retry
condition on the response, queue or attempts. A receiver checks the
``X-Rqueue-Signature`` header with :func:`verify_signature` (:mod:`.signing`).

The names are loaded on first use (PEP 562), so listing the app in
``INSTALLED_APPS`` imports nothing before Django's app registry is ready.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .jobs import DeliveryError, InvalidDeliveryError, WebhookJob, deliver, webhook_job
    from .network import DestinationRefused, Refusal
    from .signing import (
        SIGNATURE_HEADER,
        InvalidSignature,
        SignatureProblem,
        sign,
        verify_signature,
    )

__all__ = [
    "SIGNATURE_HEADER",
    "InvalidSignature",
    "SignatureProblem",
    "WebhookJob",
    "InvalidDeliveryError",
    "DeliveryError",
    "DestinationRefused",
    "Refusal",
    "deliver",
    "sign",
    "verify_signature",
    "webhook_job",
]

_HOMES = {
    "SIGNATURE_HEADER": "signing",
    "InvalidSignature": "signing",
    "SignatureProblem": "signing",
    "sign": "signing",
    "verify_signature": "signing",
    "WebhookJob": "jobs",
    "InvalidDeliveryError": "jobs",
    "DeliveryError": "jobs",
    "DestinationRefused": "network",
    "Refusal": "network",
    "deliver": "jobs",
    "webhook_job": "jobs",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
