"""The ``sentry`` fixture: sentry-sdk initialised in this process with the integration and a
recording transport, and everything it installed removed afterwards."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sentry_sdk
from sentry_sdk import integrations as sentry_integrations

from django_rqueue import middleware, signals
from django_rqueue.conf import _reset
from django_rqueue.contrib.sentry import FLUSH_UID
from django_rqueue.contrib.sentry.options import IDENTIFIER

from . import recording

#: ``sentry(**options)`` initialises sentry-sdk with ``RqueueIntegration(**options)`` and
#: returns the list the envelopes are recorded in (:func:`recording.record_of`'s shape).
Start = Callable[..., list[dict[str, Any]]]


def _forget() -> None:
    middleware.load.cache_clear()
    _reset(setting="RQUEUE")
    signals.worker_process_shutdown.disconnect(dispatch_uid=FLUSH_UID)
    for found in (
        sentry_integrations._installed_integrations,
        sentry_integrations._processed_integrations,
    ):
        found.discard(IDENTIFIER)


@pytest.fixture
def sentry(monkeypatch: pytest.MonkeyPatch) -> Iterator[Start]:
    monkeypatch.setattr(middleware, "_installed", ())
    _forget()

    def start(**options: Any) -> list[dict[str, Any]]:
        recording.ENVELOPES.clear()
        recording.init(**options)
        return recording.ENVELOPES

    yield start
    sentry_sdk.get_global_scope().set_client(None)
    monkeypatch.undo()
    _forget()
    recording.ENVELOPES.clear()
