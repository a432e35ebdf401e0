"""A sentry-sdk transport that records envelopes instead of sending them, and the test setup
of sentry-sdk with it, in this process (:data:`ENVELOPES`) or in a worker subprocess
(``tests/settings.py`` calls :func:`init_from_env` when ``RQUEUE_TEST_SENTRY_DIR`` is set).

In a subprocess each envelope is one JSON line ``{"pid", "items": [{"type", "body"}]}`` of
``<RQUEUE_TEST_SENTRY_DIR>/<pid>.jsonl``, and each ``flush()`` a line ``{"pid",
"flushed": true}``: worker children end with ``os._exit``, so a child's flushed line
shows the integration flushed it at ``worker_process_shutdown``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import sentry_sdk
from sentry_sdk.envelope import Envelope
from sentry_sdk.transport import Transport

from django_rqueue.contrib.sentry import RqueueIntegration

#: The envelopes recorded in this process, as :func:`record_of` gives them.
ENVELOPES: list[dict[str, Any]] = []
#: A DSN: sentry-sdk needs one to be active; nothing is sent to it.
DSN = "https://public@sentry.invalid/1"
#: The environment variable naming the folder a subprocess writes its envelopes to.
DIR_ENV = "RQUEUE_TEST_SENTRY_DIR"


def record_of(envelope: Envelope) -> dict[str, Any]:
    """``{"pid": int, "items": [{"type": str, "body": JSON}]}`` of ``envelope``."""
    items = []
    for item in envelope.items:
        try:
            body = json.loads(item.get_bytes())
        except ValueError:
            body = None
        items.append({"type": item.type, "body": body})
    return {"pid": os.getpid(), "items": items}


class RecordingTransport(Transport):
    """Records each envelope in :data:`ENVELOPES`, and in ``folder``'s file of this process
    when given."""

    def __init__(self, options: dict[str, Any] | None = None, folder: str = "") -> None:
        super().__init__(options)
        self.folder = folder

    def _write(self, line: dict[str, Any]) -> None:
        if self.folder:
            with open(Path(self.folder) / f"{os.getpid()}.jsonl", "a", encoding="utf-8") as f:
                f.write(json.dumps(line) + "\n")

    def capture_envelope(self, envelope: Envelope) -> None:
        record = record_of(envelope)
        ENVELOPES.append(record)
        self._write(record)

    def flush(self, timeout: float, callback: Any | None = None) -> None:
        self._write({"pid": os.getpid(), "flushed": True})


def init(folder: str = "", *, defaults: bool = False, **integration: Any) -> None:
    """``sentry_sdk.init()`` with :class:`RecordingTransport`, every transaction sampled,
    and ``RqueueIntegration(**integration)``; sentry-sdk's default integrations (logging,
    dedupe, ...) with ``defaults``."""
    sentry_sdk.init(
        dsn=DSN,
        transport=RecordingTransport(folder=folder),
        traces_sample_rate=1.0,
        default_integrations=defaults,
        auto_enabling_integrations=False,  # no patching of Django in the test process
        integrations=[RqueueIntegration(**integration)],
    )


def init_from_env() -> None:
    """:func:`init` for a worker subprocess: the folder from ``RQUEUE_TEST_SENTRY_DIR``, the
    integration's options from ``RQUEUE_TEST_SENTRY_OPTIONS`` (JSON, optional)."""
    options = json.loads(os.environ.get("RQUEUE_TEST_SENTRY_OPTIONS") or "{}")
    init(os.environ[DIR_ENV], **options)


def read(folder: Path) -> list[dict[str, Any]]:
    """Every line the subprocesses wrote to ``folder``, file by file."""
    lines: list[dict[str, Any]] = []
    for path in sorted(folder.glob("*.jsonl")):
        lines.extend(json.loads(line) for line in path.read_text().splitlines() if line)
    return lines


def items(records: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The bodies of the items of type ``kind`` (``"event"``, ``"transaction"``,
    ``"check_in"``) in ``records``, each with the ``pid`` that sent it."""
    return [
        {**item["body"], "_pid": record["pid"]}
        for record in records
        for item in record.get("items", ())
        if item["type"] == kind
    ]
